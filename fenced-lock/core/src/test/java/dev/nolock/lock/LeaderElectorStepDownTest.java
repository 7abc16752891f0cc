package dev.nolock.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.CapturedStderr;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.LockSupport;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The order and the timing of a leader's step-down: on a lost lease the halt comes right after the
 * interrupt, before any successor can start and before any backend call; the loss is noticed at
 * {@code renewDeadline}, not up to a {@code retryPeriod} later; {@code close()} releases only once
 * the work thread has ended or its bound has passed.
 */
class LeaderElectorStepDownTest {

  private final List<LeaderElector> electors = new ArrayList<>();
  private final List<CountDownLatch> toOpen = new ArrayList<>();
  private final List<String> events = new CopyOnWriteArrayList<>();

  @AfterEach
  void close() {
    toOpen.forEach(CountDownLatch::countDown);
    electors.forEach(LeaderElector::close);
  }

  private LeaderElector start(LockBackendRecorder backend, ElectorConfig config, Leadership l) {
    LeaderElector elector = LeaderElector.start(backend, config, l);
    electors.add(elector);
    return elector;
  }

  private CountDownLatch latch() {
    CountDownLatch latch = new CountDownLatch(1);
    toOpen.add(latch);
    return latch;
  }

  /** Forwards to a shared in-memory server and records each release as an event. */
  private class LockBackendRecorder extends ForwardingLockBackend {
    private final String who;

    LockBackendRecorder(String who, InMemoryLockBackend server) {
      super(server);
      this.who = who;
    }

    @Override
    public boolean release(String name, String owner, FencingToken token) {
      events.add(who + ": release" + releaseNote());
      return super.release(name, owner, token);
    }

    /** What the test records about the moment of the release. */
    String releaseNote() {
      return "";
    }
  }

  /**
   * Work that ignores interrupts, the case the halt exists for: it records each interrupt and goes
   * on until {@code mayEnd} opens.
   */
  private class StubbornWork implements Leadership {
    final String who;
    final CountDownLatch started = new CountDownLatch(1);
    final CountDownLatch interrupted = new CountDownLatch(1);
    final CountDownLatch mayEnd;
    final AtomicReference<Thread> thread = new AtomicReference<>();
    final boolean endsOnStoppedLeading;

    StubbornWork(String who, CountDownLatch mayEnd, boolean endsOnStoppedLeading) {
      this.who = who;
      this.mayEnd = mayEnd;
      this.endsOnStoppedLeading = endsOnStoppedLeading;
    }

    @Override
    public void onStartedLeading(HeldLock leadership) {
      Thread previous = thread.getAndSet(Thread.currentThread());
      events.add(
          who
              + ": started leading"
              + (previous == null ? "" : ", previous term's work running: " + previous.isAlive()));
      started.countDown();
      while (mayEnd.getCount() > 0) {
        try {
          mayEnd.await();
        } catch (InterruptedException ignored) {
          interrupted.countDown();
          events.add(who + ": work interrupted, goes on");
        }
      }
      events.add(who + ": work ended");
    }

    @Override
    public void onStoppedLeading() {
      events.add(who + ": onStoppedLeading");
      if (endsOnStoppedLeading) {
        mayEnd.countDown();
      }
    }

    boolean working() {
      Thread t = thread.get();
      return t != null && t.isAlive();
    }
  }

  /** A successor: records when it starts leading and whether the old leader's work still ran. */
  private final class Successor implements Leadership {
    final CountDownLatch started = new CountDownLatch(1);
    final StubbornWork predecessor;

    Successor(StubbornWork predecessor) {
      this.predecessor = predecessor;
    }

    @Override
    public void onStartedLeading(HeldLock leadership) throws InterruptedException {
      events.add("B: started leading, A's work running: " + predecessor.working());
      started.countDown();
      new CountDownLatch(1).await();
    }

    @Override
    public void onStoppedLeading() {}
  }

  private static ElectorConfig.Builder fast(String identity) {
    return fast("step-down", identity);
  }

  private static ElectorConfig.Builder fast(String election, String identity) {
    return ElectorConfig.custom(election)
        .identity(identity)
        .leaseDuration(Duration.ofSeconds(1))
        .renewDeadline(Duration.ofMillis(500))
        .retryPeriod(Duration.ofMillis(200));
  }

  private int indexOf(String prefix) {
    for (int i = 0; i < events.size(); i++) {
      if (events.get(i).startsWith(prefix)) {
        return i;
      }
    }
    return -1;
  }

  /**
   * Leader A's backend stops answering its renewals (a partition), and its work ignores interrupts.
   * The server's clock is frozen, so A's lease never expires there: successor B can only take over
   * once A releases it, and A's release blocks until B has started (as a release to a backend that
   * does not answer blocks for its timeout). The halt must come before any of that: right after the
   * interrupt, before onStoppedLeading, before any release call.
   */
  @Test
  void onALostLeaseTheHaltComesRightAfterTheInterruptBeforeAnyReleaseAndBeforeTheSuccessorStarts()
      throws Exception {
    InMemoryLockBackend server = new InMemoryLockBackend(new ManualLeaseClock());
    StubbornWork a = new StubbornWork("A", latch(), false);
    Successor b = new Successor(a);
    CountDownLatch releaseMayReturn = latch();
    LockBackendRecorder aBackend =
        new LockBackendRecorder("A", server) {
          @Override
          public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
            if (a.started.getCount() == 0) {
              throw new BackendUnavailableException("A is partitioned", null);
            }
            return super.tryAcquire(name, owner, ttl);
          }

          @Override
          public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
            throw new BackendUnavailableException("A is partitioned", null);
          }

          @Override
          public boolean release(String name, String owner, FencingToken token) {
            boolean released = super.release(name, owner, token);
            try {
              // Blocks like a release to a backend that does not answer, here until B leads.
              b.started.await(10, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            return released;
          }

          @Override
          public Option<LeaseHolder> holder(String name) {
            throw new BackendUnavailableException("A is partitioned", null);
          }
        };
    start(
        aBackend,
        fast("A")
            .workStopTimeout(Duration.ofMillis(100)) // A's release waits for its work that long
            .halt(
                () -> {
                  boolean interruptedFirst = awaitQuietly(a.interrupted);
                  events.add("A: halt, interrupt sent before it: " + interruptedFirst);
                })
            .build(),
        a);
    a.started.await();
    start(new LockBackendRecorder("B", server), fast("B").haltOnLoss(false).build(), b);

    await("B leads").atMost(Duration.ofSeconds(20)).until(() -> b.started.getCount() == 0);
    await().until(() -> indexOf("A: halt") >= 0);

    assertThat(indexOf("A: halt"))
        .as("A's halt hook ran before its successor's onStartedLeading; events: %s", events)
        .isNotNegative()
        .isLessThan(indexOf("B: started leading"));
    assertThat(events)
        .as("the interrupt was sent before the halt")
        .contains("A: halt, interrupt sent before it: true");
    int release = indexOf("A: release");
    assertThat(release < 0 || release > indexOf("A: halt"))
        .as("no release call between A's interrupt and its halt; events: %s", events)
        .isTrue();
    await().until(() -> indexOf("A: onStoppedLeading") >= 0);
    assertThat(indexOf("A: onStoppedLeading"))
        .as("onStoppedLeading runs after the halt; events: %s", events)
        .isGreaterThan(indexOf("A: halt"));
    assertThat(events)
        .as("the hazard is real: B started while A's work, ignoring the interrupt, still ran")
        .contains("B: started leading, A's work running: true");
    releaseMayReturn.countDown();
  }

  /**
   * The elector's clock is a manual one and its waits move it instead of blocking, so the clock
   * reading at the halt is when the leader noticed. Renewals fail from the start; the server's
   * lease never expires. With retryPeriod 4 s and renewDeadline 6 s, polling every retryPeriod
   * notices at 8 s; waking at min(retryPeriod, renewDeadline - time since the last renewal) notices
   * at 6 s.
   */
  @Test
  void theLeaderNoticesAMissedRenewDeadlineAtTheDeadlineNotARetryPeriodLater() throws Exception {
    ManualLeaseClock clock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend(new ManualLeaseClock());
    AtomicLong haltedAt = new AtomicLong(-1);
    List<Duration> waits = new CopyOnWriteArrayList<>();
    CountDownLatch mayEnd = latch();
    // Not ended by onStoppedLeading: work that starts late would skip its wait and miss the
    // interrupt the test checks for.
    StubbornWork a = new StubbornWork("A", mayEnd, false);
    LockBackendRecorder backend =
        new LockBackendRecorder("A", server) {
          @Override
          public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
            throw new BackendUnavailableException("renewals do not get through", null);
          }
        };
    start(
        backend,
        ElectorConfig.custom("deadline")
            .identity("A")
            .leaseDuration(Duration.ofSeconds(10))
            .renewDeadline(Duration.ofSeconds(6))
            .retryPeriod(Duration.ofSeconds(4))
            .clock(clock)
            .pause(
                (wake, d) -> {
                  if (haltedAt.get() >= 0) {
                    wake.awaitNanos(d.toNanos()); // after the step-down: wait for real
                  } else {
                    waits.add(d);
                    clock.advance(d);
                  }
                })
            .halt(() -> haltedAt.compareAndSet(-1, clock.nanoTime()))
            .build(),
        a);

    await().until(() -> haltedAt.get() >= 0);

    assertThat(Duration.ofNanos(haltedAt.get()))
        .as(
            "the leader, elected at 0 on its clock and never renewed, stepped down by its"
                + " renewDeadline of 6 s; its waits: %s",
            waits)
        .isEqualTo(Duration.ofSeconds(6));
    assertThat(waits)
        .as("a 4 s retryPeriod, then the 2 s left to the deadline")
        .containsExactly(Duration.ofSeconds(4), Duration.ofSeconds(2));
    // The interrupt is sent before the halt, but the work thread notices it on its own time.
    assertThat(awaitQuietly(a.interrupted)).as("the work was interrupted").isTrue();
  }

  /**
   * close() on a leader whose work ignores interrupts and ends only when the test lets it, from the
   * test's thread, once close() waits and no release has happened: the lease is released only after
   * the work thread ended.
   */
  @Test
  void closeReleasesOnlyAfterTheWorkThreadEnded() throws Exception {
    InMemoryLockBackend server = new InMemoryLockBackend();
    CountDownLatch mayEnd = latch();
    StubbornWork a = new StubbornWork("A", mayEnd, false);
    LockBackendRecorder backend =
        new LockBackendRecorder("A", server) {
          @Override
          String releaseNote() {
            return ", work running: " + a.working();
          }
        };
    CountDownLatch closeWaits = new CountDownLatch(1);
    LeaderElector elector =
        start(
            backend,
            fast("A").workStopTimeout(Duration.ofSeconds(30)).pause(signalling(closeWaits)).build(),
            a);
    a.started.await();

    Thread closer = closeOn("closer", elector);
    await("close() waits for the work, or returned")
        .until(() -> endedOrOpen(closer, closeWaits) || indexOf("A: onStoppedLeading") >= 0);

    assertThat(events)
        .as("no release while the work runs; events: %s", events)
        .noneMatch(e -> e.startsWith("A: release"));
    mayEnd.countDown();
    assertEnds(closer);
    assertThat(events)
        .as("close() released after the work thread ended; events: %s", events)
        .contains("A: release, work running: false");
    assertThat(indexOf("A: work ended")).isNotNegative().isLessThan(indexOf("A: release"));
    assertThat(server.holder("step-down").isEmpty()).as("and it did release").isTrue();
  }

  /**
   * close() on a leader whose work ignores interrupts and onStoppedLeading: close() waits
   * workStopTimeout, then releases anyway, and says so (counted, logged at error level). The
   * elector's clock is a manual one that close()'s wait moves instead of blocking, so the clock
   * reading at the release is how long close() waited; the lease (30 s, renewDeadline 20 s) does
   * not run out meanwhile.
   */
  @Test
  void closeWaitsForAWorkThreadThatDoesNotEndOnlyUpToWorkStopTimeoutAndCountsTheOverrun()
      throws Exception {
    ManualLeaseClock clock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    StubbornWork a = new StubbornWork("A", latch(), false);
    List<Duration> closeWaits = new CopyOnWriteArrayList<>();
    LockBackendRecorder backend =
        new LockBackendRecorder("A", server) {
          @Override
          String releaseNote() {
            // The work notices an interrupt sent before the release on its own thread, a moment
            // later: the manual clock lets close()'s wait end at once, so wait for it (bounded).
            return ", interrupted before: "
                + awaitQuietly(a.interrupted)
                + ", at "
                + Duration.ofNanos(clock.nanoTime());
          }
        };
    Thread test = Thread.currentThread();
    LeaderElector elector =
        start(
            backend,
            ElectorConfig.custom("step-down")
                .identity("A")
                .leaseDuration(Duration.ofSeconds(30))
                .renewDeadline(Duration.ofSeconds(20))
                .retryPeriod(Duration.ofMillis(200))
                .workStopTimeout(Duration.ofSeconds(5))
                .metrics(registry, "step-down")
                .clock(clock)
                .pause(
                    (wake, d) -> {
                      // close()'s wait for the campaign thread, woken as that thread ends, is a
                      // real one: this test measures its wait for the work.
                      if (Thread.currentThread() == test && !campaigning("step-down")) {
                        closeWaits.add(d);
                        clock.advance(d);
                      } else {
                        wake.awaitNanos(d.toNanos());
                      }
                    })
                .build(),
            a);
    a.started.await();

    elector.close();

    Counter overruns = registry.find("nolock.leadership.work.overruns").counter();
    assertThat(overruns)
        .as("a work thread still running after workStopTimeout is counted; events: %s", events)
        .isNotNull();
    assertThat(overruns.count()).isEqualTo(1);
    assertThat(a.working()).as("the work ignored everything").isTrue();
    assertThat(events)
        .as(
            "released only once close() had waited workStopTimeout (5 s); its waits: %s",
            closeWaits)
        .contains("A: release, interrupted before: true, at PT5S");
    assertThat(server.holder("step-down").isEmpty()).as("the lease was released").isTrue();
  }

  /**
   * close() while the campaign thread is in a backend call that does not answer (an acquire that
   * ignores interrupts): close() waits for it workStopTimeout + leaseDuration on the elector's
   * clock (a manual one that the closer's waits move), no longer, and the grant that comes back
   * after starts no work.
   */
  @Test
  void closeWaitsForACampaignStuckInTheBackendWorkStopTimeoutPlusLeaseDuration() throws Exception {
    ManualLeaseClock clock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend();
    CountDownLatch inAcquire = new CountDownLatch(1);
    CountDownLatch acquireMayReturn = latch();
    LockBackendRecorder backend =
        new LockBackendRecorder("A", server) {
          @Override
          public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
            inAcquire.countDown();
            awaitQuietly(acquireMayReturn);
            return super.tryAcquire(name, owner, ttl);
          }
        };
    List<Duration> closeWaits = new CopyOnWriteArrayList<>();
    StubbornWork a = new StubbornWork("A", latch(), true);
    LeaderElector elector =
        start(
            backend,
            fast("A")
                .workStopTimeout(Duration.ofSeconds(2))
                .clock(clock)
                .pause(
                    (wake, d) -> {
                      if (Thread.currentThread().getName().equals("closer")) {
                        closeWaits.add(d);
                        clock.advance(d);
                      } else {
                        wake.awaitNanos(d.toNanos());
                      }
                    })
                .build(),
            a);
    inAcquire.await();
    assertEnds(closeOn("closer", elector));

    assertThat(closeWaits)
        .as("close() waited workStopTimeout (2 s) + leaseDuration (1 s) for the campaign thread")
        .containsExactly(Duration.ofSeconds(3));
    acquireMayReturn.countDown();
    await().until(() -> !campaigning("step-down"));
    assertThat(a.started.getCount()).as("the late grant started no work").isOne();
    assertThat(server.holder("step-down").isEmpty()).as("and was released").isTrue();
  }

  /**
   * No halt configured, and the leader's work ignores interrupts. The server's lease expires (as
   * after a pause or a partition longer than the lease), so A's renewal is refused and A steps
   * down; nobody else campaigns, so the lease is free at once. Taking it again now would run a
   * second term's work beside the first in one process: A must wait for its lost term's work to
   * end, say so once {@code workStopTimeout} has passed, and lead again only after that work ended.
   */
  @Test
  void withoutAHaltTheCandidateDoesNotLeadAgainWhileItsLostTermsWorkStillRuns() throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend(serverClock);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    CountDownLatch mayEnd = latch();
    StubbornWork a = new StubbornWork("A", mayEnd, false);
    AtomicInteger acquired = new AtomicInteger();
    AtomicInteger freePausesAfterLoss = new AtomicInteger();
    LockBackendRecorder backend =
        new LockBackendRecorder("A", server) {
          @Override
          public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
            Option<FencingToken> got = super.tryAcquire(name, owner, ttl);
            got.forEach(token -> events.add("A: acquired token " + token.value()));
            got.forEach(token -> acquired.incrementAndGet());
            return got;
          }
        };
    try (CapturedStderr err = new CapturedStderr()) {
      start(
          backend,
          fast("A")
              .haltOnLoss(false)
              .workStopTimeout(Duration.ofMillis(100))
              .metrics(registry, "step-down")
              .pause(
                  (wake, d) -> {
                    // Each wait A starts after its step-down while the lease is free is one more
                    // chance it had to take the lease again.
                    if (indexOf("A: onStoppedLeading") >= 0
                        && server.holder("step-down").isEmpty()) {
                      freePausesAfterLoss.incrementAndGet();
                    }
                    wake.awaitNanos(d.toNanos());
                  })
              .build(),
          a);
      a.started.await();
      serverClock.advance(Duration.ofSeconds(2)); // past the 1 s lease: the next renewal is refused

      await("A leads again, or has waited twice on a free lease past workStopTimeout")
          .atMost(Duration.ofSeconds(20))
          .until(
              () ->
                  acquired.get() >= 2
                      || (freePausesAfterLoss.get() >= 2 && overruns(registry) >= 1));

      assertThat(events.stream().filter(e -> e.startsWith("A: started leading")))
          .as(
              "onStartedLeading was not called a second time while the lost term's work, which"
                  + " ignores interrupts, still ran; events: %s",
              events)
          .containsExactly("A: started leading");
      assertThat(acquired).as("nor was the lease taken again; events: %s", events).hasValue(1);
      assertThat(a.working()).as("the first term's work still runs").isTrue();
      assertThat(events).as("it was interrupted").contains("A: work interrupted, goes on");
      assertThat(overruns(registry))
          .as("the work thread outliving workStopTimeout is counted once")
          .isEqualTo(1);
      assertThat(err.lines())
          .as("and logged at error level")
          .anyMatch(
              line ->
                  line.contains("ERROR")
                      && line.contains("LeaderElector")
                      && line.contains("step-down")
                      && line.contains("workStopTimeout"));
    }

    mayEnd.countDown();

    await("A leads again once its first term's work ended")
        .atMost(Duration.ofSeconds(20))
        .until(() -> indexOf("A: started leading, previous term's work running") >= 0);
    assertThat(events)
        .as("the second term started after the first term's work ended; events: %s", events)
        .contains("A: started leading, previous term's work running: false");
    assertThat(indexOf("A: work ended"))
        .isNotNegative()
        .isLessThan(indexOf("A: started leading, previous"));
    assertThat(acquired).hasValue(2);
  }

  /**
   * close() on a candidate that waits for its lost term's work, which never ends: close() waits
   * {@code workStopTimeout} for it, as for a leader's work, then returns, and the candidate never
   * led again.
   */
  @Test
  void closeWhileWaitingForALostTermsWorkReturnsAfterWorkStopTimeout() throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend(serverClock);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    StubbornWork a = new StubbornWork("A", latch(), false);
    LeaderElector elector =
        start(
            new LockBackendRecorder("A", server),
            fast("A")
                .haltOnLoss(false)
                .workStopTimeout(Duration.ofMillis(100))
                .metrics(registry, "step-down")
                .build(),
            a);
    a.started.await();
    serverClock.advance(Duration.ofSeconds(2));
    await("A waits for its lost term's work past workStopTimeout")
        .atMost(Duration.ofSeconds(20))
        .until(() -> overruns(registry) >= 1);

    try (CapturedStderr err = new CapturedStderr()) {
      elector.close();

      assertThat(err.lines())
          .as("close() says it returns while the work runs")
          .anyMatch(
              line -> line.contains("ERROR") && line.contains("close() returns while it runs"));
    }
    assertThat(a.working()).as("the work ignored everything").isTrue();
    assertThat(overruns(registry)).as("the same thread is counted once").isEqualTo(1);
    assertThat(events.stream().filter(e -> e.startsWith("A: started leading")))
        .as("A never led again; events: %s", events)
        .hasSize(1);
  }

  /**
   * A close() nested in onStoppedLeading, which the first close() calls: it returns at once
   * (joining itself would wait forever) and releases nothing, and the first close() releases once
   * the work ended, which the test lets it do only after it saw the nested call return.
   */
  @Test
  void aCloseNestedInOnStoppedLeadingReturnsAtOnceAndReleasesNothing() throws Exception {
    InMemoryLockBackend server = new InMemoryLockBackend();
    CountDownLatch mayEnd = latch();
    AtomicReference<LeaderElector> self = new AtomicReference<>();
    StubbornWork a =
        new StubbornWork("A", mayEnd, false) {
          @Override
          public void onStoppedLeading() {
            super.onStoppedLeading();
            self.get().close();
            events.add("A: nested close returned");
          }
        };
    LockBackendRecorder backend =
        new LockBackendRecorder("A", server) {
          @Override
          String releaseNote() {
            return ", work running: " + a.working();
          }
        };
    LeaderElector elector =
        start(backend, fast("A").workStopTimeout(Duration.ofSeconds(30)).build(), a);
    self.set(elector);
    a.started.await();

    Thread closer = closeOn("closer", elector);
    await().until(() -> indexOf("A: nested close returned") >= 0 || !closer.isAlive());

    assertThat(events)
        .as("the nested close() released nothing while the work ran; events: %s", events)
        .noneMatch(e -> e.startsWith("A: release"));
    assertThat(closer.isAlive()).as("the first close() still waits for the work").isTrue();
    mayEnd.countDown();
    assertEnds(closer);
    assertThat(events.stream().filter(e -> e.startsWith("A: release")))
        .as("one release, after the work ended; events: %s", events)
        .containsExactly("A: release, work running: false");
    assertThat(indexOf("A: work ended")).isLessThan(indexOf("A: release"));
  }

  /**
   * Two close() calls on two threads: the second waits for the first, which waits for the work; it
   * neither releases the lease nor returns before the work ended.
   */
  @Test
  void aSecondCloseOnAnotherThreadWaitsForTheFirstAndReleasesNothingItself() throws Exception {
    InMemoryLockBackend server = new InMemoryLockBackend();
    CountDownLatch mayEnd = latch();
    StubbornWork a = new StubbornWork("A", mayEnd, false);
    LockBackendRecorder backend =
        new LockBackendRecorder("A", server) {
          @Override
          String releaseNote() {
            return ", work running: " + a.working();
          }
        };
    CountDownLatch closeWaits = new CountDownLatch(1);
    LeaderElector elector =
        start(
            backend,
            fast("A").workStopTimeout(Duration.ofSeconds(30)).pause(signalling(closeWaits)).build(),
            a);
    a.started.await();
    Thread first = closeOn("closer-1", elector);
    await().until(() -> endedOrOpen(first, closeWaits) || indexOf("A: onStoppedLeading") >= 0);

    Thread second = new Thread(elector::close, "second");
    second.start();
    await("the second close() waits on a latch, or returned")
        .until(() -> !second.isAlive() || waitsOnALatch(second));

    assertThat(events)
        .as("no release while the work runs; events: %s", events)
        .noneMatch(e -> e.startsWith("A: release"));
    assertThat(second.isAlive()).as("the second close() waits for the first").isTrue();
    mayEnd.countDown();
    assertEnds(first);
    assertEnds(second);
    assertThat(events.stream().filter(e -> e.startsWith("A: release")))
        .as("one release, after the work ended; events: %s", events)
        .containsExactly("A: release, work running: false");
    assertThat(indexOf("A: work ended")).isLessThan(indexOf("A: release"));
  }

  /**
   * close() on a thread whose interrupt flag is set still waits for the work (an interrupted wait
   * ends at once), and returns with the flag set again.
   */
  @Test
  void closeOnAnInterruptedThreadStillWaitsForTheWorkAndKeepsTheInterrupt() throws Exception {
    InMemoryLockBackend server = new InMemoryLockBackend();
    CountDownLatch mayEnd = latch();
    StubbornWork a = new StubbornWork("A", mayEnd, false);
    LockBackendRecorder backend =
        new LockBackendRecorder("A", server) {
          @Override
          String releaseNote() {
            return ", work running: " + a.working();
          }
        };
    CountDownLatch closeWaits = new CountDownLatch(1);
    LeaderElector elector =
        start(
            backend,
            fast("A").workStopTimeout(Duration.ofSeconds(30)).pause(signalling(closeWaits)).build(),
            a);
    a.started.await();

    Thread closer =
        new Thread(
            () -> {
              Thread.currentThread().interrupt();
              elector.close();
              events.add("close returned, interrupted: " + Thread.currentThread().isInterrupted());
            },
            "closer");
    closer.start();
    await().until(() -> endedOrOpen(closer, closeWaits));

    assertThat(events)
        .as(
            "close() on an interrupted thread released nothing while the work ran; events: %s",
            events)
        .noneMatch(e -> e.startsWith("A: release"));
    mayEnd.countDown();
    assertEnds(closer);
    assertThat(events)
        .contains("A: release, work running: false", "close returned, interrupted: true");
    assertThat(indexOf("A: work ended")).isLessThan(indexOf("A: release"));
  }

  /**
   * An Error from onStoppedLeading on close(): the lease is released and the lock closed all the
   * same, and the Error is rethrown after that.
   */
  @Test
  void anErrorFromOnStoppedLeadingOnCloseIsRethrownAfterTheRelease() throws Exception {
    InMemoryLockBackend server = new InMemoryLockBackend();
    CountDownLatch started = new CountDownLatch(1);
    Leadership failing =
        new Leadership() {
          @Override
          public void onStartedLeading(HeldLock leadership) throws InterruptedException {
            started.countDown();
            new CountDownLatch(1).await();
          }

          @Override
          public void onStoppedLeading() {
            throw new NoClassDefFoundError("org/example/Dashboard");
          }
        };
    LeaderElector elector = start(new LockBackendRecorder("A", server), fast("A").build(), failing);
    started.await();

    assertThatThrownBy(elector::close).isInstanceOf(NoClassDefFoundError.class);

    assertThat(server.holder("step-down").isEmpty())
        .as("the lease was released before the Error went on; events: %s", events)
        .isTrue();
    assertThat(elector.isLeader()).isFalse();
  }

  /**
   * An Error from onStoppedLeading after a loss (renewDeadline passed while the server still holds
   * the lease; no halt): the campaign thread ends on it, but not before the lost term's lease was
   * released, or the lock's watchdog would renew it for ever and nobody would lead.
   */
  @Test
  void anErrorFromOnStoppedLeadingAfterALossEndsTheCampaignOnlyAfterTheRelease() throws Exception {
    ManualLeaseClock clock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend(new ManualLeaseClock());
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch stopping = new CountDownLatch(1);
    Leadership failing =
        new Leadership() {
          @Override
          public void onStartedLeading(HeldLock leadership) throws InterruptedException {
            started.countDown();
            new CountDownLatch(1).await();
          }

          @Override
          public void onStoppedLeading() {
            stopping.countDown();
            throw new NoClassDefFoundError("org/example/Dashboard");
          }
        };
    start(
        partitionedRenewals("A", server),
        deadlineConfig("error-on-stop", clock, stopping).haltOnLoss(false).build(),
        failing);
    started.await();

    await("the campaign thread ends")
        .dontCatchUncaughtExceptions()
        .until(() -> !campaigning("error-on-stop"));

    assertThat(stopping.getCount()).as("the leader stepped down").isZero();
    assertThat(server.holder("error-on-stop").isEmpty())
        .as(
            "the lost term's lease was released before the campaign thread ended; events: %s",
            events)
        .isTrue();
  }

  /**
   * An acquire in flight when close() begins: close() marks the elector closed and waits for the
   * campaign, and only then does the grant come back, well within its TTL. The campaign must see
   * that close() began and release the grant instead of starting a term nobody would end (without
   * that check the work would start here and the grant would be a live term).
   */
  @Test
  void aGrantThatComesBackWhileCloseWaitsForTheCampaignIsReleasedAndStartsNoWork()
      throws Exception {
    InMemoryLockBackend server = new InMemoryLockBackend();
    CountDownLatch inAcquire = new CountDownLatch(1);
    CountDownLatch acquireMayReturn = latch();
    LockBackendRecorder backend =
        new LockBackendRecorder("A", server) {
          @Override
          public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
            inAcquire.countDown();
            awaitQuietly(acquireMayReturn);
            Option<FencingToken> got = super.tryAcquire(name, owner, ttl);
            events.add("A: granted " + got.isDefined());
            return got;
          }
        };
    StubbornWork a = new StubbornWork("A", latch(), true);
    LeaderElector elector =
        start(
            backend,
            fast("A")
                .leaseDuration(Duration.ofSeconds(30))
                .renewDeadline(Duration.ofSeconds(20))
                .build(),
            a);
    inAcquire.await();
    Thread closer = closeOn("closer", elector);
    await("close() waits for the campaign thread")
        .until(() -> !closer.isAlive() || waitsInTheElector(closer));
    assertThat(closer.isAlive()).as("close() waits for the acquire in flight").isTrue();

    acquireMayReturn.countDown(); // within the 30 s TTL: only close()'s mark refuses it
    assertEnds(closer);

    assertThat(a.started.getCount())
        .as("no work started for a grant that came back after close() began; events: %s", events)
        .isOne();
    assertThat(events).containsSubsequence("A: granted true", "A: release");
    assertThat(server.holder("step-down").isEmpty()).as("the grant was released").isTrue();
  }

  /**
   * A lease lost while close() waits for the work (which ignores interrupts): nothing else watches
   * it then, so close() applies haltOnLoss itself.
   */
  @Test
  void aLeaseLostWhileCloseWaitsForTheWorkHalts() throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend(serverClock);
    CountDownLatch mayEnd = latch();
    StubbornWork a = new StubbornWork("A", mayEnd, false);
    CountDownLatch closeWaits = new CountDownLatch(1);
    LeaderElector elector =
        start(
            new LockBackendRecorder("A", server),
            fast("A")
                .workStopTimeout(Duration.ofSeconds(5))
                .pause(signalling(closeWaits))
                .halt(() -> events.add("A: halt, work running: " + a.working()))
                .build(),
            a);
    a.started.await();
    Thread closer = closeOn("closer", elector);
    await().until(() -> endedOrOpen(closer, closeWaits));

    serverClock.advance(Duration.ofSeconds(2)); // past the 1 s lease: the next renewal is refused
    await().until(() -> indexOf("A: halt") >= 0 || !closer.isAlive());

    assertThat(events)
        .as("the lease lost during close()'s wait halted; events: %s", events)
        .contains("A: halt, work running: true");
    mayEnd.countDown();
    assertEnds(closer);
  }

  /**
   * No halt; renewDeadline passes while the server still holds the lease (renewals do not get
   * through), and the work ignores interrupts. Releasing the lease at once would let a successor
   * start beside that work: the release waits for the work, which the test ends only once the
   * release is seen waiting and nothing was released.
   */
  @Test
  void withoutAHaltALostTermsLeaseIsReleasedOnlyAfterItsWorkEnded() throws Exception {
    ManualLeaseClock clock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend(new ManualLeaseClock());
    CountDownLatch mayEnd = latch();
    StubbornWork a = new StubbornWork("A", mayEnd, false);
    CountDownLatch releaseWaits = new CountDownLatch(1);
    LockBackendRecorder backend =
        new LockBackendRecorder("A", server) {
          @Override
          public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
            throw new BackendUnavailableException("renewals do not get through", null);
          }

          @Override
          String releaseNote() {
            return ", work running: " + a.working();
          }
        };
    CountDownLatch stepDown = new CountDownLatch(1);
    start(
        backend,
        deadlineConfig("step-down", clock, stepDown)
            .haltOnLoss(false)
            .workStopTimeout(Duration.ofSeconds(30))
            .pause(
                (wake, d) -> {
                  if (Thread.currentThread().getName().startsWith("nolock-elector-release")) {
                    releaseWaits.countDown();
                    wake.awaitNanos(d.toNanos());
                  } else if (indexOf("A: onStoppedLeading") < 0) {
                    clock.advance(d);
                  } else {
                    wake.awaitNanos(d.toNanos());
                  }
                })
            .build(),
        a);
    await().until(() -> releaseWaits.getCount() == 0 || indexOf("A: release") >= 0);

    assertThat(events)
        .as("nothing released while the lost term's work runs; events: %s", events)
        .contains("A: onStoppedLeading")
        .noneMatch(e -> e.startsWith("A: release"));
    mayEnd.countDown();
    await().until(() -> indexOf("A: release") >= 0);
    assertThat(events).contains("A: release, work running: false");
    assertThat(indexOf("A: work ended")).isLessThan(indexOf("A: release"));
  }

  /**
   * The campaign thread interrupted by someone else while it leads: it steps down (without a halt:
   * the lease was not lost), releases, logs it at error level, and ends.
   */
  @Test
  void anInterruptedCampaignThreadStepsDownAndSaysSo() throws Exception {
    InMemoryLockBackend server = new InMemoryLockBackend();
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch stopped = new CountDownLatch(1);
    Leadership l =
        new Leadership() {
          @Override
          public void onStartedLeading(HeldLock leadership) throws InterruptedException {
            started.countDown();
            new CountDownLatch(1).await();
          }

          @Override
          public void onStoppedLeading() {
            stopped.countDown();
          }
        };
    try (CapturedStderr err = new CapturedStderr()) {
      start(
          new LockBackendRecorder("A", server),
          ElectorConfig.custom("interrupted")
              .identity("A")
              .leaseDuration(Duration.ofSeconds(1))
              .renewDeadline(Duration.ofMillis(500))
              .retryPeriod(Duration.ofMillis(200))
              .halt(() -> events.add("A: halt"))
              .build(),
          l);
      started.await();
      Thread.getAllStackTraces().keySet().stream()
          .filter(t -> t.getName().equals("nolock-elector-interrupted"))
          .forEach(Thread::interrupt);
      await().until(() -> !campaigning("interrupted"));

      assertThat(stopped.getCount()).as("the leader stepped down").isZero();
      assertThat(server.holder("interrupted").isEmpty()).as("and released").isTrue();
      assertThat(events).as("without a halt").doesNotContain("A: halt");
      assertThat(err.lines())
          .anyMatch(
              line ->
                  line.contains("ERROR")
                      && line.contains("interrupted")
                      && line.contains("campaign thread"));
    }
  }

  /**
   * Before the halt comes only the one log line that says why the process died: no metric, no
   * callback, no backend call that could delay it.
   */
  @Test
  void theHaltComesAfterTheOneLineThatSaysWhyAndBeforeTheLossIsCounted() throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend(serverClock);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    StubbornWork a = new StubbornWork("A", latch(), false);
    try (CapturedStderr err = new CapturedStderr()) {
      start(
          new LockBackendRecorder("A", server),
          fast("A")
              .metrics(registry, "step-down")
              .halt(
                  () ->
                      events.add(
                          "A: halt, losses counted: "
                              + registry.get("nolock.leadership.losses").counter().count()
                              + ", logged: "
                              + err.lines().stream().anyMatch(l -> l.contains("lost leadership"))))
              .build(),
          a);
      a.started.await();
      serverClock.advance(Duration.ofSeconds(2));
      await().until(() -> indexOf("A: halt") >= 0);
    }
    assertThat(events)
        .as("a halted process has said why, and nothing else (a metric, a callback) came before")
        .contains("A: halt, losses counted: 0.0, logged: true");
  }

  /**
   * close() calls onStoppedLeading, which here drains: it waits for the work, which ignores the
   * interrupt. The lease is lost meanwhile (the server's lease expires, the next renewal is
   * refused), so a successor may start beside that work. Nothing but close() watches the lease
   * then: the halt must come while onStoppedLeading still waits, and the loss is counted.
   */
  @Test
  void aLeaseLostWhileOnStoppedLeadingRunsInCloseHalts() throws Exception {
    assertALossWhileOnStoppedLeadingRunsHalts("closer", elector -> closeOn("closer", elector));
  }

  /** The same on the campaign thread, interrupted by someone else, which steps down as close(). */
  @Test
  void aLeaseLostWhileOnStoppedLeadingRunsAfterAnInterruptedCampaignHalts() throws Exception {
    assertALossWhileOnStoppedLeadingRunsHalts(
        "interrupted",
        elector -> {
          Thread loop = campaignThread("interrupted");
          loop.interrupt();
          return loop;
        });
  }

  private void assertALossWhileOnStoppedLeadingRunsHalts(
      String election, java.util.function.Function<LeaderElector, Thread> stop) throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend(serverClock);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    CountDownLatch halted = latch();
    CountDownLatch mayEnd = latch();
    StubbornWork a =
        new StubbornWork("A", mayEnd, false) {
          @Override
          public void onStoppedLeading() {
            super.onStoppedLeading();
            serverClock.advance(Duration.ofSeconds(2)); // past the 1 s lease: renewals refused
            events.add("A: onStoppedLeading returns, halted meanwhile: " + awaitQuietly(halted));
            mayEnd.countDown();
          }
        };
    LeaderElector elector =
        start(
            new LockBackendRecorder("A", server),
            fast(election, "A")
                .workStopTimeout(Duration.ofSeconds(30))
                .metrics(registry, election)
                .halt(
                    () -> {
                      events.add("A: halt, work running: " + a.working());
                      halted.countDown();
                    })
                .build(),
            a);
    a.started.await();

    assertEnds(stop.apply(elector));

    assertThat(events)
        .as("the lease lost while onStoppedLeading ran halted at once; events: %s", events)
        .contains("A: halt, work running: true")
        .contains("A: onStoppedLeading returns, halted meanwhile: true");
    assertThat(registry.get("nolock.leadership.losses").counter().count())
        .as("and the loss is counted")
        .isEqualTo(1);
  }

  /**
   * The work closes its own lease (try-with-resources) when close() interrupts it, then cleans up:
   * a released lease is not a lost one. The term ends as close() meant it to, without a halt and
   * without a loss counted, and a warning says the work released its own lease.
   */
  @Test
  void aWorkThatReleasesItsOwnLeaseOnCloseIsNotALoss() throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (CapturedStderr err = new CapturedStderr()) {
      CountDownLatch started = new CountDownLatch(1);
      Leadership releasing =
          new Leadership() {
            @Override
            public void onStartedLeading(HeldLock leadership) throws InterruptedException {
              try (leadership) {
                started.countDown();
                new CountDownLatch(1).await();
              } finally {
                // Cleanup after try-with-resources released the lease, until the elector decided.
                awaitHaltOrWarning(err);
              }
            }

            @Override
            public void onStoppedLeading() {}
          };
      LeaderElector elector =
          start(
              new LockBackendRecorder("A", new InMemoryLockBackend()),
              fast("A").metrics(registry, "step-down").halt(() -> events.add("A: halt")).build(),
              releasing);
      started.await();

      elector.close();

      assertThat(events).as("a graceful close() never halts").doesNotContain("A: halt");
      assertThat(registry.get("nolock.leadership.losses").counter().count()).isZero();
      assertThat(err.lines()).anyMatch(l -> l.contains("WARN") && l.contains(RELEASED_ITS_OWN));
    }
  }

  /**
   * The work releases its own lease while it leads: the campaign ends the term without a halt and
   * without a loss counted, says so at warn level, and calls onStoppedLeading.
   */
  @Test
  void aWorkThatReleasesItsOwnLeaseWhileLeadingEndsTheTermWithoutAHalt() throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (CapturedStderr err = new CapturedStderr()) {
      CountDownLatch stopped = new CountDownLatch(1);
      AtomicInteger terms = new AtomicInteger();
      Leadership releasing =
          new Leadership() {
            @Override
            public void onStartedLeading(HeldLock leadership) throws InterruptedException {
              if (terms.incrementAndGet() == 1) {
                leadership.release();
                awaitHaltOrWarning(err);
              } else {
                new CountDownLatch(1).await();
              }
            }

            @Override
            public void onStoppedLeading() {
              stopped.countDown();
            }
          };
      start(
          new LockBackendRecorder("A", new InMemoryLockBackend()),
          fast("A").metrics(registry, "step-down").halt(() -> events.add("A: halt")).build(),
          releasing);
      await().until(() -> events.contains("A: halt") || stopped.getCount() == 0);

      assertThat(events).as("a released lease is no loss: no halt").doesNotContain("A: halt");
      assertThat(stopped.getCount()).as("the term ended: onStoppedLeading ran").isZero();
      assertThat(registry.get("nolock.leadership.losses").counter().count()).isZero();
      assertThat(err.lines()).anyMatch(l -> l.contains("WARN") && l.contains(RELEASED_ITS_OWN));
    }
  }

  private static final String RELEASED_ITS_OWN = "the leader's work released its own lease";

  /**
   * The usual work shape, {@code try (HeldLock term = ...)} around {@code checkPointOfNoReturn},
   * meets a lost lease first and releases it on its way out; the campaign looks only afterwards
   * (its wait holds it until the work has ended). A lost lease is still a loss: the process halts.
   */
  @Test
  void aLostLeaseThatTheWorkReleasedOnItsWayOutStillHalts() throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    InMemoryLockBackend server = new InMemoryLockBackend(serverClock);
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch workEnded = new CountDownLatch(1);
    AtomicInteger lossesSeen = new AtomicInteger();
    AtomicInteger serverExpired = new AtomicInteger();
    Leadership releasingOnItsWayOut =
        new Leadership() {
          @Override
          public void onStartedLeading(HeldLock term) {
            try (term) {
              started.countDown();
              while (!Thread.currentThread().isInterrupted()) { // the next term ends on close()
                term.checkPointOfNoReturn(Duration.ofMillis(1));
                LockSupport.parkNanos(Duration.ofMillis(1).toNanos());
              }
            } catch (LeaseLostException e) {
              lossesSeen.incrementAndGet();
            } finally {
              workEnded.countDown();
            }
          }

          @Override
          public void onStoppedLeading() {}
        };
    try (CapturedStderr err = new CapturedStderr()) {
      start(
          new LockBackendRecorder("A", server),
          fast("A")
              .halt(() -> events.add("A: halt"))
              .pause(
                  (wake, d) -> {
                    wake.awaitNanos(d.toNanos());
                    if (serverExpired.get() > 0
                        && Thread.currentThread().getName().equals("nolock-elector-step-down")) {
                      awaitQuietly(workEnded); // the campaign looks only once the work released
                    }
                  })
              .build(),
          releasingOnItsWayOut);
      started.await();

      serverExpired.incrementAndGet();
      serverClock.advance(Duration.ofSeconds(2)); // the server expires the lease: renewal refused
      await()
          .until(
              () ->
                  events.contains("A: halt")
                      || err.lines().stream().anyMatch(l -> l.contains(RELEASED_ITS_OWN)));
    }
    assertThat(lossesSeen.get()).as("the work met the loss and released on its way out").isOne();
    assertThat(events)
        .as("a lost lease that the work then released is still a loss")
        .contains("A: halt");
  }

  /** Keeps the work running until a halt or the warning that it released its own lease. */
  private void awaitHaltOrWarning(CapturedStderr err) {
    Thread.interrupted(); // the cleanup of an interrupted work
    await()
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                events.contains("A: halt")
                    || err.lines().stream().anyMatch(l -> l.contains(RELEASED_ITS_OWN)));
  }

  /**
   * close() on an interrupted thread: onStoppedLeading (whose blocking waits would throw at once)
   * and the backend's release (etcd and Redis clients fail on an interrupted thread) run with the
   * flag clear; close() returns with it set again.
   */
  @Test
  void closeOnAnInterruptedThreadRunsOnStoppedLeadingAndTheReleaseWithTheFlagClear()
      throws Exception {
    StubbornWork a = interruptRecordingWork();
    LeaderElector elector = start(interruptRecordingBackend(), fast("A").build(), a);
    a.started.await();
    Thread closer =
        new Thread(
            () -> {
              Thread.currentThread().interrupt();
              elector.close();
              events.add("close returned, interrupted: " + Thread.currentThread().isInterrupted());
            },
            "closer");
    closer.start();
    assertEnds(closer);

    assertThat(events)
        .as("events: %s", events)
        .containsSubsequence(
            "A: onStoppedLeading, interrupted: false",
            "A: release, interrupted: false",
            "close returned, interrupted: true");
  }

  /** The same on the campaign thread, interrupted by someone else: it steps down with it clear. */
  @Test
  void anInterruptedCampaignRunsOnStoppedLeadingAndTheReleaseWithTheFlagClear() throws Exception {
    StubbornWork a = interruptRecordingWork();
    start(interruptRecordingBackend(), fast("interrupted", "A").build(), a);
    a.started.await();
    Thread loop = campaignThread("interrupted");
    loop.interrupt();
    assertEnds(loop);

    assertThat(events)
        .as("events: %s", events)
        .containsSubsequence(
            "A: onStoppedLeading, interrupted: false", "A: release, interrupted: false");
  }

  private StubbornWork interruptRecordingWork() {
    return new StubbornWork("A", latch(), true) {
      @Override
      public void onStoppedLeading() {
        events.add("A: onStoppedLeading, interrupted: " + Thread.currentThread().isInterrupted());
        mayEnd.countDown();
      }
    };
  }

  private LockBackendRecorder interruptRecordingBackend() {
    return new LockBackendRecorder("A", new InMemoryLockBackend()) {
      @Override
      String releaseNote() {
        return ", interrupted: " + Thread.currentThread().isInterrupted();
      }
    };
  }

  /**
   * close() called by the leader's own work: it neither interrupts itself (its release would run
   * with the flag set) nor reports itself as a work thread that outlived workStopTimeout.
   */
  @Test
  void aCloseFromTheWorkItselfNeitherInterruptsItNorCountsAnOverrun() throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    AtomicReference<LeaderElector> self = new AtomicReference<>();
    CountDownLatch mayClose = latch();
    CountDownLatch closed = new CountDownLatch(1);
    Leadership closing =
        new Leadership() {
          @Override
          public void onStartedLeading(HeldLock leadership) throws InterruptedException {
            mayClose.await();
            self.get().close();
            events.add("close returned, interrupted: " + Thread.currentThread().isInterrupted());
            closed.countDown();
          }

          @Override
          public void onStoppedLeading() {}
        };
    try (CapturedStderr err = new CapturedStderr()) {
      LeaderElector elector =
          start(
              interruptRecordingBackend(),
              fast("A").metrics(registry, "step-down").build(),
              closing);
      self.set(elector);
      mayClose.countDown();
      assertThat(awaitQuietly(closed)).as("the work's close() returned").isTrue();

      assertThat(events)
          .as("events: %s", events)
          .containsSubsequence(
              "A: release, interrupted: false", "close returned, interrupted: false");
      assertThat(overruns(registry)).as("no overrun counted").isZero();
      assertThat(err.lines()).noneMatch(l -> l.contains("workStopTimeout"));
    }
  }

  /**
   * The logger throws on the line that reports the loss (a full disk, a broken appender): the halt
   * must come all the same, on the campaign's step-down.
   */
  @Test
  void aLoggerThatThrowsOnTheLossLineDoesNotSkipTheHalt() throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    CountDownLatch halted = latch();
    StubbornWork a = new StubbornWork("A", latch(), false);
    try (ThrowingStderr err = new ThrowingStderr("lost leadership")) {
      start(
          new LockBackendRecorder("A", new InMemoryLockBackend(serverClock)),
          fast("A").halt(halted::countDown).build(),
          a);
      a.started.await();
      serverClock.advance(Duration.ofSeconds(2)); // past the 1 s lease: the renewal is refused

      assertThat(awaitQuietly(halted)).as("halted although the log line threw").isTrue();
      assertThat(err.thrown()).as("the logger did throw").isPositive();
    }
  }

  /** The same for a loss while close() waits for the work. */
  @Test
  void aLoggerThatThrowsOnTheLossLineDoesNotSkipTheHaltInClose() throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    CountDownLatch halted = latch();
    CountDownLatch mayEnd = latch();
    StubbornWork a = new StubbornWork("A", mayEnd, false);
    CountDownLatch closeWaits = new CountDownLatch(1);
    LeaderElector elector =
        start(
            new LockBackendRecorder("A", new InMemoryLockBackend(serverClock)),
            fast("A")
                .workStopTimeout(Duration.ofSeconds(30))
                .pause(signalling(closeWaits))
                .halt(halted::countDown)
                .build(),
            a);
    a.started.await();
    try (ThrowingStderr err = new ThrowingStderr("lost leadership")) {
      Thread closer = closeOn("closer", elector);
      await().until(() -> endedOrOpen(closer, closeWaits));
      serverClock.advance(Duration.ofSeconds(2));

      assertThat(awaitQuietly(halted)).as("halted although the log line threw").isTrue();
      assertThat(err.thrown()).as("the logger did throw").isPositive();
      mayEnd.countDown();
      assertEnds(closer);
    }
  }

  /**
   * close() from onNewLeader, which the campaign calls as it takes the lease and before it starts
   * the work: the term ends with its lease released, and onStoppedLeading, which pairs with an
   * onStartedLeading that never ran, is not called.
   */
  @Test
  void aCloseBeforeTheWorkStartedDoesNotCallOnStoppedLeading() throws Exception {
    InMemoryLockBackend server = new InMemoryLockBackend();
    AtomicReference<LeaderElector> self = new AtomicReference<>();
    CountDownLatch mayClose = latch();
    CountDownLatch closed = new CountDownLatch(1);
    Leadership closing =
        new Leadership() {
          @Override
          public void onStartedLeading(HeldLock leadership) {
            events.add("A: started leading");
          }

          @Override
          public void onStoppedLeading() {
            events.add("A: onStoppedLeading");
          }

          @Override
          public void onNewLeader(String identity) {
            awaitQuietly(mayClose);
            self.get().close();
            closed.countDown();
          }
        };
    self.set(start(new LockBackendRecorder("A", server), fast("A").build(), closing));
    mayClose.countDown();
    assertThat(awaitQuietly(closed)).as("close() from onNewLeader returned").isTrue();

    assertThat(events)
        .as("the term ended before its work started; events: %s", events)
        .containsExactly("A: release");
    assertThat(server.holder("step-down").isEmpty()).isTrue();
  }

  /** Replaces System.err (where slf4j-simple logs) with one whose lines containing a text throw. */
  private static final class ThrowingStderr implements AutoCloseable {
    private final java.io.PrintStream original = System.err;
    private final AtomicInteger thrown = new AtomicInteger();

    ThrowingStderr(String needle) {
      System.setErr(
          new java.io.PrintStream(original, true, java.nio.charset.StandardCharsets.UTF_8) {
            @Override
            public void println(String line) {
              if (line != null && line.contains(needle)) {
                thrown.incrementAndGet();
                throw new IllegalStateException("the appender failed");
              }
              super.println(line);
            }
          });
    }

    int thrown() {
      return thrown.get();
    }

    @Override
    public void close() {
      System.setErr(original);
    }
  }

  private static Thread campaignThread(String election) {
    return Thread.getAllStackTraces().keySet().stream()
        .filter(t -> t.getName().equals("nolock-elector-" + election))
        .findFirst()
        .orElseThrow();
  }

  /** Renewals that do not get through, on {@code server}, whose clock the test does not move. */
  private LockBackendRecorder partitionedRenewals(String who, InMemoryLockBackend server) {
    return new LockBackendRecorder(who, server) {
      @Override
      public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
        throw new BackendUnavailableException("renewals do not get through", null);
      }
    };
  }

  /**
   * lease 10 s, renewDeadline 6 s, retryPeriod 4 s on {@code clock}, which the campaign's waits
   * move until {@code steppedDown} opens, and which waits for real after.
   */
  private static ElectorConfig.Builder deadlineConfig(
      String name, ManualLeaseClock clock, CountDownLatch steppedDown) {
    return ElectorConfig.custom(name)
        .identity("A")
        .leaseDuration(Duration.ofSeconds(10))
        .renewDeadline(Duration.ofSeconds(6))
        .retryPeriod(Duration.ofSeconds(4))
        .clock(clock)
        .pause(
            (wake, d) -> {
              if (steppedDown.getCount() > 0
                  && Thread.currentThread().getName().startsWith("nolock-elector-")
                  && !Thread.currentThread().getName().startsWith("nolock-elector-release")) {
                clock.advance(d);
              } else {
                wake.awaitNanos(d.toNanos());
              }
            });
  }

  /** A pause that opens {@code latch} when a thread named "closer…" waits in it, then waits. */
  private static ElectorConfig.Pause signalling(CountDownLatch latch) {
    return (wake, d) -> {
      if (Thread.currentThread().getName().startsWith("closer")) {
        latch.countDown();
      }
      wake.awaitNanos(d.toNanos());
    };
  }

  private static Thread closeOn(String name, LeaderElector elector) {
    Thread thread = new Thread(elector::close, name);
    thread.start();
    return thread;
  }

  private static boolean endedOrOpen(Thread thread, CountDownLatch latch) {
    return !thread.isAlive() || latch.getCount() == 0;
  }

  /**
   * Whether {@code thread} waits inside close()'s work (past the mark that close() began: the mark
   * comes before {@code closeOnce}).
   */
  private static boolean waitsInTheElector(Thread thread) {
    Thread.State state = thread.getState();
    return (state == Thread.State.WAITING || state == Thread.State.TIMED_WAITING)
        && java.util.Arrays.stream(thread.getStackTrace())
            .anyMatch(
                f ->
                    f.getClassName().equals(LeaderElector.class.getName())
                        && f.getMethodName().equals("closeOnce"));
  }

  /** Whether {@code thread} is parked in a CountDownLatch's await. */
  private static boolean waitsOnALatch(Thread thread) {
    Object blocker = LockSupport.getBlocker(thread);
    return blocker != null && blocker.getClass().getName().contains("CountDownLatch");
  }

  private static void assertEnds(Thread thread) throws InterruptedException {
    thread.join(TimeUnit.SECONDS.toMillis(20)); // bounded so that a hang fails, not stalls
    assertThat(thread.isAlive()).as("%s ended", thread.getName()).isFalse();
  }

  /** Whether the campaign thread of {@code election} is alive. */
  private static boolean campaigning(String election) {
    return Thread.getAllStackTraces().keySet().stream()
        .anyMatch(t -> t.getName().equals("nolock-elector-" + election) && t.isAlive());
  }

  private static double overruns(SimpleMeterRegistry registry) {
    Counter counter = registry.find("nolock.leadership.work.overruns").counter();
    return counter == null ? 0 : counter.count();
  }

  @Test
  void aWorkStopTimeoutOutOfRangeIsRefusedSayingHowToFixIt() {
    assertThatThrownBy(() -> ElectorConfig.custom("x").workStopTimeout(Duration.ofMillis(-1)))
        .hasMessageContaining("workStopTimeout must be between PT0S and PT10M, got PT-0.001S")
        .hasMessageContaining("Duration.ZERO releases the lease without waiting");
    assertThatThrownBy(() -> ElectorConfig.custom("x").workStopTimeout(Duration.ofMinutes(11)))
        .hasMessageContaining("workStopTimeout must be between");
    assertThat(ElectorConfig.custom("x").workStopTimeout(Duration.ZERO).build().workStopTimeout())
        .isZero();
  }

  private static boolean awaitQuietly(CountDownLatch latch) {
    try {
      // Bounded only so that a missing interrupt fails the test instead of hanging it.
      return latch.await(10, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      return false;
    }
  }
}
