package dev.nolock.lock;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.GrantOwner;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Leader election on any {@link LockBackend}: "leader election is distributed locking in disguise".
 * The leader is whoever holds the election's lease, and its work is fenced like any holder's: the
 * lease's {@link dev.nolock.patterns.FencingToken} is the term number the resource checks.
 *
 * <p>Algorithm (the Kubernetes arithmetic, validated by {@link ElectorConfig}):
 *
 * <ol>
 *   <li>A candidate tries to take the lease every {@code retryPeriod} (jittered up to x1.2); when
 *       it does not get it, it reads who holds it ({@link LockBackend#holder}) and calls {@link
 *       Leadership#onNewLeader} if that holder differs from the last one it saw.
 *   <li>The leader's lease is renewed by compare-and-swap on its token (the {@link FencedLock}
 *       watchdog); {@link Leadership#onStartedLeading} runs on its own thread.
 *   <li>The leader steps down as soon as a renewal is refused (the lock's watchdog wakes the
 *       campaign at once), or when it has not renewed for {@code renewDeadline} — before its {@code
 *       leaseDuration} can expire, so that no successor starts while it still works. While it
 *       leads, the campaign wakes at {@code min(retryPeriod, renewDeadline − time since the last
 *       renewal)}, so a missed deadline is noticed when it passes, not up to a {@code retryPeriod}
 *       later. Stepping down after a loss is, in this order:
 *       <ol>
 *         <li>interrupt the work thread;
 *         <li>halt the process, unless {@code haltOnLoss(false)}: work that ignores the interrupt
 *             must not overlap the successor, and client-go's {@code os.Exit(1)} in {@code
 *             OnStoppedLeading} exists for that reason. Nothing the backend or the owner does can
 *             delay it: no backend call and no callback comes before it;
 *         <li>call {@link Leadership#onStoppedLeading} (after a real halt it never runs);
 *         <li>release the lease on a thread of its own, best effort: a backend that does not answer
 *             blocks only that thread for its own timeout, never the step-down nor the campaign,
 *             and the lease ends at its TTL anyway;
 *         <li>campaign again (step 1) only once the lost term's {@link Leadership#onStartedLeading}
 *             has returned. Without a halt, work that ignores the interrupt still runs, and winning
 *             again would run a second term's work beside it in this process, two grants of the
 *             same thing at once. So the candidate waits, still reporting other leaders through
 *             {@link Leadership#onNewLeader}; once the work has run {@code workStopTimeout} past
 *             its interrupt it is logged at error level and counted ({@code
 *             nolock.leadership.work.overruns}), and the candidate keeps waiting: a candidate that
 *             never leads again is visible and safe, a term overlapping its predecessor in one
 *             process is neither. Other candidates may lead meanwhile.
 *       </ol>
 *   <li>{@link #close()} steps down gracefully, without halting, and frees the lease only once the
 *       work has ended, so that a successor never overlaps it:
 *       <ol>
 *         <li>stop campaigning;
 *         <li>interrupt the work thread and call {@link Leadership#onStoppedLeading};
 *         <li>wait for the work thread to end, at most {@code workStopTimeout} (the watchdog still
 *             renews the lease meanwhile); a thread still running then is logged at error level and
 *             counted ({@code nolock.leadership.work.overruns});
 *         <li>release the lease, so that a successor need not wait for it to expire.
 *       </ol>
 *       A close while the candidate waits for a lost term's work (step 3, item 5) waits for it at
 *       most {@code workStopTimeout} as well, then returns, logging and counting a thread still
 *       running.
 *   <li>A backend that is down ({@link BackendUnavailableException}) is retried every {@code
 *       retryPeriod}; a leader whose renewals keep failing that way steps down at {@code
 *       renewDeadline}. Any other exception (a missing table, a malformed lease item, Redis {@code
 *       WRONGTYPE}) is counted ({@code nolock.leadership.errors}) and logged at error level, and
 *       the campaign goes on after a {@code retryPeriod}: it leads again once the backend answers
 *       properly. A follower meets it in its own calls; a leader makes no backend call but its
 *       renewals, so the elector hands the {@link FencedLock} a view of the backend that passes
 *       every renewal failure on unchanged (the watchdog logs it and retries, as for any holder)
 *       and also wakes the campaign with it: a leader whose renewal throws such an exception steps
 *       down at once (as in step 3, halting by default), without waiting for {@code renewDeadline}.
 *   <li>An {@link Error} on the campaign thread ({@code NoClassDefFoundError}, {@code
 *       OutOfMemoryError}) is logged at error level, steps down a leader as in step 3 (no one would
 *       watch its term after the thread ends; the release is made on the campaign thread before it
 *       ends), and is rethrown: the campaign thread ends; the elector is not campaigning any more.
 *       An {@code Error} thrown by a renewal is handled as in step 5.
 * </ol>
 *
 * A paused leader (GC, SIGSTOP) cannot step down while paused: its writes must go through a fence.
 */
public final class LeaderElector implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(LeaderElector.class);

  private final ElectorConfig config;
  private final Leadership leadership;
  private final LockBackend backend;
  private final FencedLock lock;
  private final Thread loop;
  private final ReentrantLock mutex = new ReentrantLock();
  private final Condition wake = mutex.newCondition();
  private final Counter changes;
  private final Counter losses;
  private final Counter errors;
  private final Counter overruns;
  private final Timer leading;

  /**
   * The last renewal that failed with anything but {@link BackendUnavailableException}, with the
   * token of the term it renewed; the campaign loop takes it.
   */
  private final AtomicReference<RenewalFailure> renewalFailure = new AtomicReference<>();

  private record RenewalFailure(FencingToken token, Throwable cause) {}

  private volatile boolean running = true;
  private volatile HeldLock held; // written under mutex, with work
  private volatile long leaderSinceNanos;
  private String observedLeader; // only the loop thread touches it
  private Work work;
  private boolean signalled; // under mutex: a signal that came while the loop was not waiting

  /**
   * The work of the last term lost, until it has ended: the campaign does not acquire meanwhile.
   * Written by the campaign thread.
   */
  private volatile LostWork lostWork;

  /** A term being ended: its lease and its work. */
  private record Term(HeldLock lease, Work work) {}

  /**
   * A term's work: the thread running {@link Leadership#onStartedLeading}, and whether that call
   * has returned (the thread is still alive for a moment after, to wake the campaign).
   */
  private record Work(Thread thread, CountDownLatch ended, AtomicBoolean overrunCounted) {
    boolean running() {
      return ended.getCount() > 0;
    }
  }

  /** A lost term's work, interrupted at {@code sinceNanos} on the elector's clock. */
  private record LostWork(Work work, long sinceNanos) {}

  private LeaderElector(LockBackend backend, ElectorConfig config, Leadership leadership) {
    this.config = Objects.requireNonNull(config, "config");
    this.leadership = Objects.requireNonNull(leadership, "leadership");
    this.backend = Objects.requireNonNull(backend, "backend");
    Duration interval = min(config.retryPeriod(), config.leaseDuration().dividedBy(3));
    this.lock =
        FencedLock.create(
            new RenewalsWatched(),
            LockConfig.custom(LockPurpose.CORRECTNESS)
                .owner(config.identity())
                .renewalInterval(interval)
                .clock(config.clock())
                .onLeaseLost(lost -> signal())
                .build());
    Tags tags = Tags.of("component", "election", "name", config.name());
    this.changes =
        Counter.builder("nolock.leadership.changes")
            .description("Times this candidate became leader")
            .tags(tags)
            .register(config.registry());
    this.losses =
        Counter.builder("nolock.leadership.losses")
            .description("Leaderships lost (not released)")
            .tags(tags)
            .register(config.registry());
    this.errors =
        Counter.builder("nolock.leadership.errors")
            .description(
                "Campaign and leader renewal failures other than BackendUnavailableException (a"
                    + " missing table, a malformed lease): logged at error level, a leader steps"
                    + " down, and the campaign goes on")
            .tags(tags)
            .register(config.registry());
    this.overruns =
        Counter.builder("nolock.leadership.work.overruns")
            .description(
                "Leader work threads still running workStopTimeout after their interrupt: on"
                    + " close() the lease was released anyway and only the fence stops that"
                    + " work's writes; after a lost lease the candidate does not campaign until"
                    + " the thread ends")
            .tags(tags)
            .register(config.registry());
    this.leading =
        Timer.builder("nolock.leadership.held")
            .description("Time spent as leader")
            .tags(tags)
            .register(config.registry());
    this.loop = new Thread(this::run, "nolock-elector-" + config.name());
    loop.setDaemon(true);
  }

  /** Creates and starts a candidate. */
  public static LeaderElector start(
      LockBackend backend, ElectorConfig config, Leadership leadership) {
    LeaderElector elector = new LeaderElector(backend, config, leadership);
    elector.loop.start();
    return elector;
  }

  /** True while this candidate leads. */
  public boolean isLeader() {
    HeldLock current = held;
    return current != null && current.isHeld();
  }

  /**
   * Stops campaigning and, if leading, steps down without halting (step 4 of the class's
   * algorithm): the lease is released once the work thread has ended, or after {@code
   * workStopTimeout}. A lost term's work still running is waited for as long.
   */
  @Override
  public void close() {
    running = false;
    signal();
    try {
      loop.join(TimeUnit.SECONDS.toMillis(30));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    Term term = endTerm();
    if (term != null) {
      stopGracefully(term);
    } else {
      LostWork lost = lostWork;
      if (lost != null && !awaitEnd(lost.work())) {
        overrun(lost.work(), "close() returns while it runs");
      }
    }
    lock.close();
  }

  private void run() {
    try {
      campaign();
    } catch (Error e) {
      // Not swallowed: the thread ends. But not silently, and not leaving a term nobody watches.
      boolean leading = held != null;
      LOG.error(
          "Election {}: the campaign thread ends on {}{}",
          config.name(),
          e.toString(),
          leading ? "; stepping down first" : "",
          e);
      if (leading) {
        try {
          // The thread ends here: nothing is left for a background release to spare.
          release(stepDownOnLoss("the campaign thread ended on " + e));
        } catch (Throwable stepDownFailed) {
          e.addSuppressed(stepDownFailed);
        }
      }
      throw e;
    }
  }

  private void campaign() {
    while (running) {
      try {
        HeldLock current = held;
        LostWork lost = lostWork;
        if (current == null && lost != null && lost.work().running()) {
          observeHolder();
          awaitLostWork(lost);
        } else if (current == null) {
          if (lost != null) {
            lost.work().thread().join(); // it has returned: only its signal is left to run
            lostWork = null;
          }
          Option<HeldLock> got = lock.tryAcquire(config.name(), config.leaseDuration());
          if (got.isDefined()) {
            lead(got.get());
          } else {
            observeHolder();
            pause(jittered(config.retryPeriod()));
          }
        } else {
          RenewalFailure failure = renewalFailure.getAndSet(null);
          Duration sinceRenewal = config.leaseDuration().minus(current.deadline().remaining());
          if (failure != null && failure.token().equals(current.token())) {
            survive("a renewal of the lease failed", failure.cause());
            pause(jittered(config.retryPeriod()));
          } else if (!current.isHeld()) {
            releaseInBackground(stepDownOnLoss("the lease was lost"));
          } else if (sinceRenewal.compareTo(config.renewDeadline()) >= 0) {
            releaseInBackground(
                stepDownOnLoss(
                    "no renewal for "
                        + sinceRenewal.toMillis()
                        + " ms (renewDeadline "
                        + config.renewDeadline().toMillis()
                        + " ms)"));
          } else {
            // Wake when the deadline passes, not at the next poll after it: a renewal that
            // succeeds meanwhile only makes this check find it met.
            pause(min(config.retryPeriod(), config.renewDeadline().minus(sinceRenewal)));
          }
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        running = false;
      } catch (BackendUnavailableException e) {
        LOG.warn("Election {}: backend unavailable, retrying", config.name(), e);
        pause(jittered(config.retryPeriod()));
      } catch (RuntimeException e) {
        survive("the campaign failed", e);
        pause(jittered(config.retryPeriod()));
      }
    }
  }

  /**
   * A backend that answers wrongly rather than not at all (a missing table, a malformed lease item,
   * a key of another type): the campaign must outlive it, or a follower never campaigns again and a
   * leader's work runs on with no one watching its lease. A leader steps down, since what it knows
   * of its term can no longer be trusted.
   */
  private void survive(String what, Throwable e) {
    errors.increment();
    boolean leading = held != null;
    LOG.error(
        "Election {}: {} on an unexpected exception; {}campaigning on",
        config.name(),
        what,
        leading ? "stepping down and " : "",
        e);
    if (leading) {
      try {
        releaseInBackground(stepDownOnLoss(what + ": " + e));
      } catch (RuntimeException stepDownFailed) {
        LOG.error("Election {}: stepping down threw", config.name(), stepDownFailed);
      }
    }
  }

  /**
   * The lease names the leader's grant; observers want the candidate behind it. A grant of this
   * candidate's own that it does not hold (an acquire whose answer was lost) leads nobody: it is
   * not reported, and it ends within one lease duration.
   */
  private void observeHolder() {
    backend
        .holder(config.name())
        .map(h -> GrantOwner.processOf(h.owner()))
        .filter(leader -> !leader.equals(config.identity()))
        .forEach(this::observe);
  }

  /**
   * Step 3, item 5, of the class's algorithm: one wait for a lost term's work to end, which wakes
   * the campaign when it does. Past {@code workStopTimeout} it is reported once, and waited for
   * still.
   */
  private void awaitLostWork(LostWork lost) {
    Duration left =
        config
            .workStopTimeout()
            .minus(Duration.ofNanos(config.clock().nanoTime() - lost.sinceNanos()));
    if (left.isNegative() || left.isZero()) {
      overrun(
          lost.work(),
          "not campaigning until it ends, so that this process never runs two terms' work at once");
      pause(config.retryPeriod());
    } else {
      pause(min(config.retryPeriod(), left));
    }
  }

  private void observe(String leader) {
    if (leader.equals(observedLeader)) {
      return;
    }
    observedLeader = leader;
    try {
      leadership.onNewLeader(leader);
    } catch (RuntimeException e) {
      LOG.error("Election {}: onNewLeader threw", config.name(), e);
    }
  }

  private void lead(HeldLock got) {
    leaderSinceNanos = config.clock().nanoTime();
    mutex.lock();
    try {
      held = got; // before any callback: an Error in one must find a term to step down
    } finally {
      mutex.unlock();
    }
    changes.increment();
    LOG.info(
        "Election {}: {} leads with token {}",
        config.name(),
        config.identity(),
        got.lease().token().value());
    observe(config.identity());
    CountDownLatch ended = new CountDownLatch(1);
    Thread thread =
        new Thread(
            () -> {
              try {
                leadership.onStartedLeading(got);
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              } catch (RuntimeException e) {
                LOG.error("Election {}: the leader's work failed", config.name(), e);
              } finally {
                ended.countDown();
                signal(); // a campaign waiting for a lost term's work may go on
              }
            },
            "nolock-leader-" + config.name());
    thread.setDaemon(true);
    mutex.lock();
    try {
      if (held != got) {
        return; // a close() that gave up waiting for this thread ended the term meanwhile
      }
      work = new Work(thread, ended, new AtomicBoolean());
      thread.start();
    } finally {
      mutex.unlock();
    }
  }

  /**
   * Takes the current term for ending it, once: the campaign thread and {@link #close()} may both
   * try. Null when there is none.
   */
  private Term endTerm() {
    mutex.lock();
    try {
      HeldLock current = held;
      if (current == null) {
        return null;
      }
      Term term = new Term(current, work);
      held = null;
      work = null;
      return term;
    } finally {
      mutex.unlock();
    }
  }

  /**
   * Steps down after a loss (step 3 of the class's algorithm): interrupt, halt, onStoppedLeading.
   * Returns the lease, still to be released, or null when there was no term.
   */
  private HeldLock stepDownOnLoss(String reason) {
    Term term = endTerm();
    if (term == null) {
      return null;
    }
    if (term.work() != null) {
      term.work().thread().interrupt();
      lostWork = new LostWork(term.work(), config.clock().nanoTime());
    }
    losses.increment();
    leading.record(Duration.ofNanos(config.clock().nanoTime() - leaderSinceNanos));
    LOG.error("Election {}: {} lost leadership: {}", config.name(), config.identity(), reason);
    if (config.haltOnLoss()) {
      config.halt().run();
    }
    stopped();
    return term.lease();
  }

  /** Step 4 of the class's algorithm, after campaigning stopped. */
  private void stopGracefully(Term term) {
    Work work = term.work();
    if (work != null) {
      work.thread().interrupt();
    }
    stopped();
    if (work != null && !awaitEnd(work)) {
      overrun(
          work,
          "releasing the lease anyway: a successor may start while it runs, and only the fence"
              + " refuses its writes");
    }
    leading.record(Duration.ofNanos(config.clock().nanoTime() - leaderSinceNanos));
    release(term.lease());
  }

  /** Waits at most {@code workStopTimeout} for {@code work}'s thread to end; true when it has. */
  private boolean awaitEnd(Work work) {
    try {
      work.thread().join(Math.max(1, config.workStopTimeout().toMillis()));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    return !work.thread().isAlive();
  }

  /** A work thread that outlived {@code workStopTimeout}: logged each time, counted once. */
  private void overrun(Work work, String consequence) {
    if (work.overrunCounted().compareAndSet(false, true)) {
      overruns.increment();
    }
    LOG.error(
        "Election {}: the leader's work thread still runs more than {} ms after it was interrupted"
            + " and told to stop (workStopTimeout); {}",
        config.name(),
        config.workStopTimeout().toMillis(),
        consequence);
  }

  private void stopped() {
    try {
      leadership.onStoppedLeading();
    } catch (RuntimeException e) {
      LOG.error("Election {}: onStoppedLeading threw", config.name(), e);
    }
  }

  /**
   * A lost term's release, off the campaign thread: it frees a lease the server may still hold
   * (renewals that did not get through), but a backend that does not answer blocks it for its own
   * timeout, and neither the next campaign nor a close must wait for that.
   */
  private void releaseInBackground(HeldLock lease) {
    if (lease == null) {
      return;
    }
    Thread thread = new Thread(() -> release(lease), "nolock-elector-release-" + config.name());
    thread.setDaemon(true);
    thread.start();
  }

  private void release(HeldLock lease) {
    if (lease == null) {
      return;
    }
    try {
      lease.release();
    } catch (RuntimeException e) {
      LOG.warn("Election {}: could not release; it expires after its TTL", config.name(), e);
    }
  }

  /**
   * The backend as this elector's {@link FencedLock} sees it. A renewal that fails with anything
   * but {@link BackendUnavailableException} is rethrown unchanged (the watchdog's handling stays
   * that of any holder) and also handed to the campaign loop, which is woken to step down: while
   * leading, the renewals are the only calls that can meet such a failure.
   */
  private final class RenewalsWatched implements LockBackend {

    @Override
    public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
      return backend.tryAcquire(name, owner, ttl);
    }

    @Override
    public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
      try {
        return backend.renew(name, owner, token, ttl);
      } catch (BackendUnavailableException e) {
        throw e;
      } catch (RuntimeException | Error e) {
        renewalFailure.set(new RenewalFailure(token, e));
        signal();
        throw e;
      }
    }

    @Override
    public boolean release(String name, String owner, FencingToken token) {
      return backend.release(name, owner, token);
    }

    @Override
    public Option<LeaseHolder> holder(String name) {
      return backend.holder(name);
    }
  }

  private void pause(Duration duration) {
    mutex.lock();
    try {
      // A loss signalled between the loop's check and this wait must not wait a whole period.
      if (running && !signalled) {
        config.pause().await(wake, duration);
      }
      signalled = false;
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      running = false;
    } finally {
      mutex.unlock();
    }
  }

  private void signal() {
    mutex.lock();
    try {
      signalled = true;
      wake.signalAll();
    } finally {
      mutex.unlock();
    }
  }

  private static Duration jittered(Duration d) {
    double factor =
        1 + ThreadLocalRandom.current().nextDouble() * (ElectorConfig.JITTER_FACTOR - 1);
    return Duration.ofNanos((long) (d.toNanos() * factor));
  }

  private static Duration min(Duration a, Duration b) {
    return a.compareTo(b) <= 0 ? a : b;
  }
}
