package dev.nolock.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.CapturedStderr;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class LeaderElectorTest {

  private final List<LeaderElector> electors = new ArrayList<>();
  private final AtomicInteger halts = new AtomicInteger();

  @AfterEach
  void close() {
    electors.forEach(LeaderElector::close);
  }

  /** Records what happened to one candidate; its work waits until interrupted. */
  private static final class Recorder implements Leadership {
    final AtomicReference<FencingToken> token = new AtomicReference<>();
    final CountDownLatch started = new CountDownLatch(1);
    final CountDownLatch stopped = new CountDownLatch(1);
    final CountDownLatch workInterrupted = new CountDownLatch(1);
    final List<String> leadersSeen = new CopyOnWriteArrayList<>();
    final AtomicInteger starts = new AtomicInteger();

    @Override
    public void onStartedLeading(HeldLock leadership) throws InterruptedException {
      starts.incrementAndGet();
      token.set(leadership.lease().token());
      started.countDown();
      try {
        new CountDownLatch(1).await(); // the leader's work runs until leadership ends
      } finally {
        workInterrupted.countDown();
      }
    }

    @Override
    public void onStoppedLeading() {
      stopped.countDown();
    }

    @Override
    public void onNewLeader(String identity) {
      leadersSeen.add(identity);
    }
  }

  private ElectorConfig.Builder fast(String name, String identity) {
    return ElectorConfig.custom(name)
        .identity(identity)
        .leaseDuration(Duration.ofSeconds(3))
        .renewDeadline(Duration.ofSeconds(2))
        .retryPeriod(Duration.ofMillis(200))
        .halt(halts::incrementAndGet);
  }

  private LeaderElector start(LockBackend backend, ElectorConfig config, Leadership l) {
    LeaderElector elector = LeaderElector.start(backend, config, l);
    electors.add(elector);
    return elector;
  }

  /**
   * The elector is a background component: a leader's work that throws (a checked exception as an
   * unchecked one) is that term's failure, logged, and the election goes on. The candidate keeps
   * its term until closed, as after work that returns, and close still stops and releases it.
   */
  @org.junit.jupiter.params.ParameterizedTest
  @org.junit.jupiter.params.provider.ValueSource(booleans = {true, false})
  void aLeadersWorkThatThrowsEndsOnlyThatWorkAndTheElectionGoesOn(boolean checked)
      throws Exception {
    InMemoryLockBackend backend = new InMemoryLockBackend();
    CountDownLatch threw = new CountDownLatch(1);
    CountDownLatch stopped = new CountDownLatch(1);
    List<String> leadersSeen = new CopyOnWriteArrayList<>();
    Leadership failing =
        new Leadership() {
          @Override
          public void onStartedLeading(HeldLock leadership) throws Exception {
            threw.countDown();
            if (checked) {
              throw new java.io.IOException("the report store refused");
            }
            throw new IllegalStateException("the report store refused");
          }

          @Override
          public void onStoppedLeading() throws Exception {
            stopped.countDown();
            throw new java.io.IOException("cleanup failed too");
          }

          @Override
          public void onNewLeader(String identity) throws Exception {
            leadersSeen.add(identity);
            throw new java.io.IOException("the dashboard is down");
          }
        };
    LeaderElector a = start(backend, fast("failing-work", "a").build(), failing);
    assertThat(threw.await(10, TimeUnit.SECONDS)).isTrue();
    Recorder b = new Recorder();
    LeaderElector second = start(backend, fast("failing-work", "b").build(), b);

    await().until(() -> b.leadersSeen.contains("a"));
    assertThat(a.isLeader()).as("the term outlives its failed work").isTrue();
    assertThat(leadersSeen).containsExactly("a");

    a.close();

    assertThat(stopped.getCount())
        .as("onStoppedLeading ran, and its exception was logged")
        .isZero();
    assertThat(b.started.await(10, TimeUnit.SECONDS))
        .as("the lease was released although the callbacks threw")
        .isTrue();
    assertThat(second.isLeader()).isTrue();
    assertThat(halts).hasValue(0);
  }

  /**
   * close() on a leader whose onStoppedLeading waits for the work and is interrupted there (the
   * process is shutting down): the callback's {@code InterruptedException} is logged like any
   * failure, close() still waits for the work and releases, and returns with the caller's interrupt
   * flag set, as it does for an interrupt that comes during its own waits. The negative control is
   * the plain catch-all: close() returned with the flag clear.
   */
  @Test
  void anInterruptThatEndsOnStoppedLeadingReachesTheCallerOfClose() throws Exception {
    InMemoryLockBackend backend = new InMemoryLockBackend();
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch stopping = new CountDownLatch(1);
    CountDownLatch workStopped = new CountDownLatch(1); // never: the shutdown comes first
    Leadership waitsForItsWork =
        new Leadership() {
          @Override
          public void onStartedLeading(HeldLock leadership) throws InterruptedException {
            started.countDown();
            new CountDownLatch(1).await(); // runs until interrupted
          }

          @Override
          public void onStoppedLeading() throws InterruptedException {
            stopping.countDown();
            Thread.currentThread().interrupt(); // the shutdown, arriving while it waits
            workStopped.await();
          }
        };
    LeaderElector a = start(backend, fast("stopping-interrupted", "a").build(), waitsForItsWork);
    assertThat(started.await(10, TimeUnit.SECONDS)).isTrue();

    boolean interruptedAfter;
    try {
      a.close();
    } finally {
      interruptedAfter = Thread.interrupted(); // and clears it for the next test
    }

    assertThat(stopping.getCount()).as("onStoppedLeading ran").isZero();
    assertThat(backend.holder("stopping-interrupted").isEmpty()).as("released").isTrue();
    assertThat(interruptedAfter)
        .as("close() returned with the interrupt onStoppedLeading threw")
        .isTrue();
  }

  /**
   * A follower's onNewLeader interrupted on the campaign thread (the process is shutting down): the
   * campaign sees the interrupt as it sees any other, says so, and ends, instead of campaigning on
   * with the interrupt swallowed. The negative control is the plain catch-all: the campaign went
   * on.
   */
  @Test
  void anInterruptThatEndsOnNewLeaderEndsTheCampaignAsAnyInterruptDoes() throws Exception {
    InMemoryLockBackend backend = new InMemoryLockBackend();
    Recorder a = new Recorder();
    start(backend, fast("observer-interrupted", "a").build(), a);
    assertThat(a.started.await(10, TimeUnit.SECONDS)).isTrue();
    AtomicReference<Thread> campaign = new AtomicReference<>();
    List<String> told = new CopyOnWriteArrayList<>();
    CountDownLatch dashboardUpdated = new CountDownLatch(1); // never: the shutdown comes first
    Leadership observer =
        new Leadership() {
          @Override
          public void onStartedLeading(HeldLock leadership) {}

          @Override
          public void onStoppedLeading() {}

          @Override
          public void onNewLeader(String identity) throws InterruptedException {
            campaign.set(Thread.currentThread());
            told.add(identity);
            Thread.currentThread().interrupt(); // the shutdown, arriving while it waits
            dashboardUpdated.await();
          }
        };
    try (CapturedStderr err = new CapturedStderr()) {
      start(backend, fast("observer-interrupted", "b").build(), observer);
      await().until(() -> campaign.get() != null);

      await("the campaign ends on the interrupt").until(() -> !campaign.get().isAlive());

      assertThat(told).containsExactly("a");
      assertThat(err.lines())
          .anyMatch(
              line ->
                  line.contains("ERROR")
                      && line.contains("campaign thread was interrupted")
                      && line.contains("observer-interrupted"));
    }
  }

  @Test
  void exactlyOneOfThreeCandidatesLeadsAndASuccessorTakesOverWithAHigherToken() throws Exception {
    InMemoryLockBackend backend = new InMemoryLockBackend();
    List<Recorder> recorders = List.of(new Recorder(), new Recorder(), new Recorder());
    List<LeaderElector> candidates = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      candidates.add(start(backend, fast("leader", "c" + i).build(), recorders.get(i)));
    }
    await().until(() -> candidates.stream().filter(LeaderElector::isLeader).count() == 1);
    await()
        .during(Duration.ofMillis(600))
        .atMost(Duration.ofSeconds(3))
        .until(() -> candidates.stream().filter(LeaderElector::isLeader).count() == 1);
    int first = indexOfLeader(candidates);
    FencingToken firstToken = recorders.get(first).token.get();

    candidates.get(first).close();

    assertThat(recorders.get(first).stopped.getCount()).isZero();
    assertThat(recorders.get(first).workInterrupted.await(10, TimeUnit.SECONDS))
        .as("the work thread was interrupted")
        .isTrue();
    await().until(() -> candidates.stream().filter(LeaderElector::isLeader).count() == 1);
    int second = indexOfLeader(candidates);
    assertThat(second).isNotEqualTo(first);
    await().until(() -> recorders.get(second).token.get() != null);
    assertThat(recorders.get(second).token.get().isNewerThan(firstToken)).isTrue();
    assertThat(halts).as("a graceful close does not halt").hasValue(0);
  }

  @Test
  void everyCandidateHearsOfEachNewLeaderOnceIncludingItselfWhenItWins() throws Exception {
    InMemoryLockBackend backend = new InMemoryLockBackend();
    Recorder a = new Recorder();
    Recorder b = new Recorder();
    Recorder c = new Recorder();
    LeaderElector first = start(backend, fast("leader", "a").build(), a);
    a.started.await();
    start(backend, fast("leader", "b").build(), b);
    start(backend, fast("leader", "c").build(), c);

    // Several retry periods pass: a follower is told once, not on every poll.
    await()
        .during(Duration.ofMillis(1000))
        .atMost(Duration.ofSeconds(5))
        .until(() -> b.leadersSeen.equals(List.of("a")) && c.leadersSeen.equals(List.of("a")));
    assertThat(a.leadersSeen).containsExactly("a");

    first.close();
    await().until(() -> b.started.getCount() == 0 || c.started.getCount() == 0);
    String winner = b.started.getCount() == 0 ? "b" : "c";
    Recorder loser = winner.equals("b") ? c : b;
    Recorder won = winner.equals("b") ? b : c;
    await().until(() -> loser.leadersSeen.equals(List.of("a", winner)));
    assertThat(won.leadersSeen).containsExactly("a", winner);
  }

  @Test
  void aLeaderWhoseRenewalIsRefusedStopsItsWorkAtOnceAndHalts() throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    InMemoryLockBackend backend = new InMemoryLockBackend(serverClock);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    Recorder a = new Recorder();
    start(backend, fast("leader", "a").metrics(registry, "leader").build(), a);
    a.started.await();

    serverClock.advance(Duration.ofSeconds(10)); // a's lease expires on the server (a paused)
    backend.tryAcquire("leader", "b", Duration.ofSeconds(30)).get();

    a.stopped.await();
    a.workInterrupted.await();
    await().until(() -> halts.get() == 1);
    assertThat(registry.get("nolock.leadership.losses").counter().count()).isEqualTo(1);
    assertThat(registry.get("nolock.leadership.changes").counter().count()).isEqualTo(1);
  }

  @Test
  void embeddersMayTurnTheHaltOff() throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    InMemoryLockBackend backend = new InMemoryLockBackend(serverClock);
    Recorder a = new Recorder();
    start(backend, fast("leader", "a").haltOnLoss(false).build(), a);
    a.started.await();

    serverClock.advance(Duration.ofSeconds(10));
    backend.tryAcquire("leader", "b", Duration.ofSeconds(30)).get();

    a.stopped.await();
    assertThat(halts).hasValue(0);
  }

  /**
   * The in-memory backend behind a switch: while broken every call throws what a damaged backend
   * throws that is not {@link dev.nolock.patterns.BackendUnavailableException} (a malformed lease
   * item, a missing table, Redis {@code WRONGTYPE}).
   */
  private static final class BreakableBackend implements LockBackend {
    final InMemoryLockBackend delegate = new InMemoryLockBackend();
    final AtomicInteger campaignFailures = new AtomicInteger();
    volatile boolean broken;

    private void check(boolean campaign) {
      if (broken) {
        if (campaign) {
          campaignFailures.incrementAndGet();
        }
        throw new IllegalStateException("malformed lease item: the token attribute is missing");
      }
    }

    @Override
    public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
      check(true);
      return delegate.tryAcquire(name, owner, ttl);
    }

    @Override
    public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
      check(false);
      return delegate.renew(name, owner, token, ttl);
    }

    @Override
    public boolean release(String name, String owner, FencingToken token) {
      check(false);
      return delegate.release(name, owner, token);
    }

    @Override
    public Option<LeaseHolder> holder(String name) {
      check(true);
      return delegate.holder(name);
    }
  }

  @Test
  void aFailureThatIsNotBackendUnavailableStepsTheLeaderDownAndTheCampaignGoesOn()
      throws Exception {
    BreakableBackend backend = new BreakableBackend();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    Recorder a = new Recorder();
    LeaderElector elector =
        LeaderElector.start(
            backend, fast("broken-backend", "a").metrics(registry, "broken-backend").build(), a);
    electors.add(elector);
    a.started.await();

    backend.broken = true;

    assertThat(a.stopped.await(10, TimeUnit.SECONDS))
        .as("the leader whose renewals throw steps down")
        .isTrue();
    assertThat(a.workInterrupted.await(10, TimeUnit.SECONDS)).isTrue();
    await("the campaign met the failure, or its thread ended")
        .until(() -> backend.campaignFailures.get() >= 2 || !campaigning("broken-backend"));

    backend.broken = false;

    await("leading again, or the campaign thread ended")
        .atMost(Duration.ofSeconds(10))
        .until(() -> elector.isLeader() || !campaigning("broken-backend"));
    assertThat(elector.isLeader())
        .as(
            "after an exception that is not BackendUnavailableException the campaign goes on and"
                + " leads again once the backend recovers")
        .isTrue();
    // isLeader() turns true before the work thread calls onStartedLeading: wait for the call.
    await("the second onStartedLeading")
        .atMost(Duration.ofSeconds(10))
        .untilAsserted(() -> assertThat(a.starts).hasValue(2));
    assertThat(registry.get("nolock.leadership.errors").counter().count())
        .isGreaterThanOrEqualTo(2);
  }

  /**
   * The in-memory backend whose {@code renew} throws {@link #renewThrows} while it is set (what a
   * Redis key of the wrong type answers: {@code WRONGTYPE}), counting the throws.
   */
  private static class RenewalThrows implements LockBackend {
    final InMemoryLockBackend delegate = new InMemoryLockBackend();
    final AtomicInteger thrown = new AtomicInteger();
    volatile RuntimeException renewThrows;

    @Override
    public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
      return delegate.tryAcquire(name, owner, ttl);
    }

    @Override
    public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
      RuntimeException failure = renewThrows;
      if (failure != null) {
        thrown.incrementAndGet();
        throw failure;
      }
      return delegate.renew(name, owner, token, ttl);
    }

    @Override
    public boolean release(String name, String owner, FencingToken token) {
      return delegate.release(name, owner, token);
    }

    @Override
    public Option<LeaseHolder> holder(String name) {
      return delegate.holder(name);
    }
  }

  /**
   * A leader's renewals are the only backend calls it makes while it leads, and the {@link
   * FencedLock} watchdog that sends them only logs a failure and retries. The elector's clock is
   * frozen here, so renewDeadline never passes: only the failure itself can end the term.
   */
  @Test
  void aLeaderWhoseRenewalThrowsAnUnexpectedExceptionStepsDownAtOnceCountsItAndCampaignsOn()
      throws Exception {
    RenewalThrows backend = new RenewalThrows();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    Recorder a = new Recorder();
    LeaderElector elector =
        start(
            backend,
            fast("renewal-wrongtype", "a")
                .clock(new ManualLeaseClock())
                .metrics(registry, "renewal-wrongtype")
                .build(),
            a);
    a.started.await();

    backend.renewThrows =
        new IllegalStateException(
            "WRONGTYPE Operation against a key holding the wrong kind of value");

    assertThat(a.stopped.await(5, TimeUnit.SECONDS))
        .as(
            "the leader whose renewal threw an exception other than BackendUnavailableException"
                + " steps down at once, not at renewDeadline (which its frozen clock never"
                + " reaches); renewals thrown: %s",
            backend.thrown.get())
        .isTrue();
    assertThat(backend.thrown).as("the renewal threw").hasPositiveValue();
    assertThat(a.workInterrupted.await(10, TimeUnit.SECONDS)).isTrue();
    assertThat(registry.get("nolock.leadership.errors").counter().count())
        .as("counted as a campaign error")
        .isGreaterThanOrEqualTo(1);
    assertThat(registry.get("nolock.leadership.losses").counter().count())
        .isGreaterThanOrEqualTo(1);
    await().until(() -> halts.get() >= 1);

    backend.renewThrows = null;

    await("leading again").atMost(Duration.ofSeconds(10)).until(() -> a.starts.get() >= 2);
    await().until(elector::isLeader);
  }

  /**
   * An {@link Error} (a class that failed to load, an {@code OutOfMemoryError}) ends the campaign
   * thread, as it should, but not silently: it is logged at error level first.
   */
  @Test
  void anErrorEndsTheCampaignOnlyAfterItIsLoggedAtErrorLevel() throws Exception {
    AtomicInteger acquires = new AtomicInteger();
    LockBackend backend =
        new RenewalThrows() {
          @Override
          public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
            acquires.incrementAndGet();
            throw new NoClassDefFoundError("org/example/MissingLeaseCodec");
          }
        };
    try (CapturedStderr err = new CapturedStderr()) {
      start(backend, fast("campaign-error", "a").build(), new Recorder());

      // The Error ends the thread uncaught, as it must; Awaitility would report it as the test's.
      await("the campaign thread ends, or goes on after the Error")
          .dontCatchUncaughtExceptions()
          .atMost(Duration.ofSeconds(10))
          .until(() -> !campaigning("campaign-error") || acquires.get() > 1);

      assertThat(err.lines())
          .as("the Error that ended the campaign thread was logged at error level by the elector")
          .anyMatch(
              line ->
                  line.contains("ERROR")
                      && line.contains("LeaderElector")
                      && line.contains("campaign-error")
                      && line.contains("NoClassDefFoundError"));
    }
    assertThat(campaigning("campaign-error")).as("the Error was not swallowed").isFalse();
    assertThat(acquires).as("the campaign stopped at the Error").hasValue(1);
  }

  /**
   * An {@link Error} on the campaign thread while it leads: nobody would watch the term any more (a
   * lost lease would interrupt no one), so the leader steps down before the thread ends.
   */
  @Test
  void aLeaderWhoseCampaignThreadEndsOnAnErrorStepsDownFirst() throws Exception {
    InMemoryLockBackend backend = new InMemoryLockBackend();
    CountDownLatch stopped = new CountDownLatch(1);
    Leadership failing =
        new Leadership() {
          @Override
          public void onStartedLeading(HeldLock leadership) throws InterruptedException {
            new CountDownLatch(1).await();
          }

          @Override
          public void onStoppedLeading() {
            stopped.countDown();
          }

          @Override
          public void onNewLeader(String identity) {
            throw new NoClassDefFoundError("org/example/LeaderDashboard");
          }
        };
    try (CapturedStderr err = new CapturedStderr()) {
      start(backend, fast("leader-error", "a").build(), failing);

      await("the campaign thread ends")
          .dontCatchUncaughtExceptions()
          .atMost(Duration.ofSeconds(10))
          .until(() -> !campaigning("leader-error"));

      assertThat(err.lines())
          .as("logged at error level before the thread ended")
          .anyMatch(
              line ->
                  line.contains("ERROR")
                      && line.contains("LeaderElector")
                      && line.contains("leader-error")
                      && line.contains("NoClassDefFoundError"));
    }
    assertThat(stopped.getCount())
        .as("onStoppedLeading is not called for a term whose onStartedLeading never ran")
        .isOne();
    assertThat(backend.holder("leader-error").isEmpty())
        .as("the leader stepped down: it released its lease")
        .isTrue();
    assertThat(halts).as("and halted, as on any lost term").hasValue(1);
  }

  /** Whether the campaign thread of {@code election} is alive. */
  private static boolean campaigning(String election) {
    return Thread.getAllStackTraces().keySet().stream()
        .anyMatch(t -> t.getName().equals("nolock-elector-" + election) && t.isAlive());
  }

  @Test
  void eachBadCombinationIsRefusedNamingTheInequality() {
    assertThatThrownBy(
            () ->
                ElectorConfig.custom("x")
                    .leaseDuration(Duration.ofSeconds(10))
                    .renewDeadline(Duration.ofSeconds(10))
                    .build())
        .hasMessageContaining("leaseDuration (PT10S) must be greater than renewDeadline")
        .hasMessageContaining("next leader starts");
    assertThatThrownBy(
            () ->
                ElectorConfig.custom("x")
                    .leaseDuration(Duration.ofSeconds(15))
                    .renewDeadline(Duration.ofSeconds(2))
                    .retryPeriod(Duration.ofSeconds(2))
                    .build())
        .hasMessageContaining("renewDeadline (PT2S) must be greater than retryPeriod x 1.2");
    assertThatThrownBy(() -> ElectorConfig.custom("x").retryPeriod(Duration.ofMillis(1)))
        .hasMessageContaining("retryPeriod must be between");
    assertThatThrownBy(() -> ElectorConfig.custom("")).hasMessageContaining("election name");
  }

  private static int indexOfLeader(List<LeaderElector> candidates) {
    for (int i = 0; i < candidates.size(); i++) {
      if (candidates.get(i).isLeader()) {
        return i;
      }
    }
    throw new AssertionError("no leader");
  }
}
