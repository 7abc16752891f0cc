package dev.nolock.lock;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.GrantOwner;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.Listener;
import dev.nolock.patterns.LockBackend;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
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
 *         <li>log the loss at error level: one line, so that a process that halts says why;
 *         <li>halt the process, unless {@code haltOnLoss(false)}: work that ignores the interrupt
 *             must not overlap the successor, and client-go's {@code os.Exit(1)} in {@code
 *             OnStoppedLeading} exists for that reason. Nothing the backend or the owner does can
 *             delay it: no backend call, no callback and no metric comes before it (only the log
 *             line, so an appender that blocks would delay it; one that throws does not skip it);
 *         <li>count the loss, then call {@link Leadership#onStoppedLeading} (after a real halt
 *             neither happens; nor does onStoppedLeading for a term whose {@link
 *             Leadership#onStartedLeading} was never called);
 *         <li>release the lease on the elector's single release thread, once the lost term's work
 *             has ended or {@code workStopTimeout} has passed since its interrupt (logged and
 *             counted as an overrun): without a halt, a renewDeadline passed or a backend error
 *             leaves a lease the server may still hold, and freeing it while the work still runs
 *             would let a successor start beside it. Best effort: a backend that does not answer
 *             blocks only that thread, never the step-down nor the campaign, and the lease ends at
 *             its TTL anyway. The release happens whatever {@code onStoppedLeading} throws;
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
 *       A lease the work released itself (it closed its {@link HeldLock}) is no loss: the term ends
 *       by the same steps, but logged at warn level, without a halt and not counted.
 *   <li>{@link #close()} steps down gracefully, without halting, and frees the lease only once the
 *       work has ended, so that a successor never overlaps it. The first call does the work; a
 *       later call waits until it is done, and a call from the elector's own threads (the work, a
 *       callback such as {@code onStoppedLeading}, the closing thread) returns at once rather than
 *       wait for itself. Interrupts shorten none of its waits: the flag is cleared on entry and
 *       after each wait, so that onStoppedLeading and the backend's release never run with it set,
 *       and set again on return. Its waits are measured on the elector's clock, but for the last
 *       (lost terms' releases), which bounds backend calls and uses {@code System.nanoTime}:
 *       <ol>
 *         <li>stop campaigning: mark the elector closed and wait for the campaign thread, at most
 *             {@code workStopTimeout + leaseDuration} (it may be finishing a step-down, or in a
 *             backend call that does not answer). A grant that comes back once the elector is
 *             marked closed is released at once and starts no work;
 *         <li>interrupt the work thread (unless it is the one calling close()), and from then on
 *             watch the lease on a thread of the elector's, as the campaign did, until the work has
 *             ended or the wait below gave up: if it is lost meanwhile (refused, {@code
 *             renewDeadline} passed, a backend error), the process halts unless {@code
 *             haltOnLoss(false)}, since the work may now overlap a successor, and the loss is
 *             counted; a lease the work released itself is logged at warn level only;
 *         <li>call {@link Leadership#onStoppedLeading}, if the term's work was started (the lease
 *             is watched meanwhile: it may wait for the work itself);
 *         <li>wait for the work thread to end, at most {@code workStopTimeout} after its interrupt;
 *             a thread still running then is logged at error level and counted ({@code
 *             nolock.leadership.work.overruns}). A work thread that called close() itself is not
 *             waited for;
 *         <li>release the lease, so that a successor need not wait for it to expire, wait at most
 *             {@code leaseDuration} for lost terms' releases still running, and close the lock.
 *             These happen whatever {@code onStoppedLeading} threw; an {@link Error} from it is
 *             rethrown after them.
 *       </ol>
 *       A close while the candidate waits for a lost term's work (step 3, item 6) waits for it at
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
 *       down at once (as in step 3: one log line, halting by default, counting after the halt),
 *       without waiting for {@code renewDeadline}.
 *   <li>An {@link Error} on the campaign thread ({@code NoClassDefFoundError}, {@code
 *       OutOfMemoryError}) steps down a leader as in step 3 (no one would watch its term after the
 *       thread ends; the campaign thread waits for the work and releases before it ends), is logged
 *       at error level, and is rethrown: the campaign thread ends; the elector is not campaigning
 *       any more. An {@code Error} thrown by a renewal is handled as in step 5.
 *   <li>An interrupt of the campaign thread (by anyone but the elector; also one that ended a
 *       callback on it, {@link Leadership#onNewLeader} or {@link Leadership#onStoppedLeading}, with
 *       an {@code InterruptedException}) is logged at error level, and a leader steps down as
 *       {@link #close()} does, steps 2 to 5 (the lease is not lost: no halt; the flag is cleared
 *       first and set again after); the campaign thread then ends.
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

  /** Lost terms' releases, one at a time, each after its term's work ended or overran. */
  private final ExecutorService releases;

  /** True on the elector's own threads, and on the thread running {@link #close()}. */
  private final ThreadLocal<Boolean> ownThread = ThreadLocal.withInitial(() -> false);

  /** Opens when the first {@link #close()} has done its work; later callers wait for it. */
  private final CountDownLatch closeDone = new CountDownLatch(1);

  /**
   * The last renewal that failed with anything but {@link BackendUnavailableException}, with the
   * token of the term it renewed; the campaign loop takes it.
   */
  private final AtomicReference<RenewalFailure> renewalFailure = new AtomicReference<>();

  private record RenewalFailure(FencingToken token, Throwable cause) {}

  private volatile boolean running = true;
  private volatile boolean campaignEnded; // set, under mutex, as the campaign thread ends
  private boolean closed; // under mutex: set by the first close(), before it ends the term
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
    Tags tags = Tags.of("component", "election", "name", config.instanceName());
    // Without metrics(..), a registry that keeps nothing (no children).
    MeterRegistry registry = config.registry().getOrElse(CompositeMeterRegistry::new);
    this.changes =
        Counter.builder("nolock.leadership.changes")
            .description("Times this candidate became leader")
            .tags(tags)
            .register(registry);
    this.losses =
        Counter.builder("nolock.leadership.losses")
            .description("Leaderships lost (not released)")
            .tags(tags)
            .register(registry);
    this.errors =
        Counter.builder("nolock.leadership.errors")
            .description(
                "Campaign and leader renewal failures other than BackendUnavailableException (a"
                    + " missing table, a malformed lease): logged at error level, a leader steps"
                    + " down, and the campaign goes on")
            .tags(tags)
            .register(registry);
    this.overruns =
        Counter.builder("nolock.leadership.work.overruns")
            .description(
                "Leader work threads still running workStopTimeout after their interrupt: the"
                    + " lease was released anyway and only the fence stops that work's writes;"
                    + " after a lost lease the candidate does not campaign until the thread ends")
            .tags(tags)
            .register(registry);
    this.leading =
        Timer.builder("nolock.leadership.held")
            .description("Time spent as leader")
            .tags(tags)
            .register(registry);
    this.loop = new Thread(this::run, "nolock-elector-" + config.name());
    loop.setDaemon(true);
    this.releases =
        Executors.newSingleThreadExecutor(
            task -> {
              Thread thread = new Thread(own(task), "nolock-elector-release-" + config.name());
              thread.setDaemon(true);
              return thread;
            });
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
   * How long {@link #close()} waits for the campaign thread to stop: {@code workStopTimeout} (it
   * may be finishing a step-down of its own) plus {@code leaseDuration} (it may be in a backend
   * call that does not answer; a grant that comes back later is released at once and starts no
   * work, and would have expired after {@code leaseDuration} anyway).
   */
  Duration campaignStopTimeout() {
    return config.workStopTimeout().plus(config.leaseDuration());
  }

  /**
   * Stops campaigning and, if leading, steps down without halting (step 4 of the class's
   * algorithm): the lease is released once the work thread has ended, or after {@code
   * workStopTimeout}. A lost term's work still running is waited for as long.
   *
   * <p>Single-flight: the first call does the work; a later call waits until it is done, except a
   * call from the elector's own threads (the work, a callback, the closing thread itself), which
   * returns at once rather than wait for itself. An interrupt does not shorten the waits; the flag
   * is cleared while close() works (onStoppedLeading and the release run without it) and set again
   * on return. An {@link Error} from {@link Leadership#onStoppedLeading} is rethrown after the
   * lease was released and the lock closed.
   */
  @Override
  public void close() {
    Interrupts interrupts = new Interrupts();
    interrupts.clear();
    try {
      closeSingleFlight(interrupts);
    } finally {
      interrupts.restore();
    }
  }

  private void closeSingleFlight(Interrupts interrupts) {
    boolean first;
    mutex.lock();
    try {
      first = !closed;
      closed = true;
      running = false;
      signalled = true;
      wake.signalAll();
    } finally {
      mutex.unlock();
    }
    if (!first) {
      if (!ownThread.get()) {
        awaitUninterruptibly(closeDone);
      }
      return;
    }
    boolean wasOwn = ownThread.get();
    ownThread.set(true);
    try {
      closeOnce(interrupts);
    } finally {
      ownThread.set(wasOwn);
      closeDone.countDown();
    }
  }

  private void closeOnce(Interrupts interrupts) {
    try {
      if (Thread.currentThread() != loop) {
        interrupts.add(awaitCampaignEnd());
      }
      Term term = endTerm();
      if (term != null) {
        stopGracefully(term, interrupts);
      } else {
        LostWork lost = lostWork;
        if (lost != null && !isCurrent(lost.work())) {
          boolean ended = awaitEnd(lost.work(), lost.sinceNanos());
          interrupts.clear();
          if (!ended) {
            overrun(lost.work(), "close() returns while it runs");
          }
        }
      }
    } finally {
      try {
        releases.shutdown();
        awaitTermination(releases, config.leaseDuration());
        interrupts.clear();
      } finally {
        lock.close();
      }
    }
  }

  /**
   * Waits under the mutex, woken by {@code wake}, until {@code done} holds or {@code bound} has
   * passed since {@code sinceNanos} on the elector's clock; an interrupt does not shorten it.
   * Returns whether one came meanwhile, for the caller to set the flag again.
   */
  private boolean awaitUninterruptibly(BooleanSupplier done, Duration bound, long sinceNanos) {
    boolean interrupted = false;
    mutex.lock();
    try {
      while (!done.getAsBoolean()) {
        Duration left = bound.minus(Duration.ofNanos(config.clock().nanoTime() - sinceNanos));
        if (left.isNegative() || left.isZero()) {
          break;
        }
        try {
          config.pause().await(wake, left);
        } catch (InterruptedException e) {
          interrupted = true;
        }
      }
    } finally {
      mutex.unlock();
    }
    return interrupted;
  }

  /**
   * Waits for the campaign thread to end, at most {@link #campaignStopTimeout()} on the elector's
   * clock, as its other waits are; returns whether an interrupt came meanwhile.
   */
  private boolean awaitCampaignEnd() {
    boolean interrupted =
        awaitUninterruptibly(() -> campaignEnded, campaignStopTimeout(), config.clock().nanoTime());
    if (campaignEnded) {
      // It has marked its end; what is left is the thread's exit.
      interrupted |= joinUninterruptibly(loop);
    }
    return interrupted;
  }

  private void run() {
    try {
      campaignAndStop();
    } finally {
      mutex.lock();
      try {
        campaignEnded = true;
        wake.signalAll();
      } finally {
        mutex.unlock();
      }
    }
  }

  private void campaignAndStop() {
    ownThread.set(true);
    try {
      campaign();
      if (!isClosed()) {
        // Only an interrupt ends the campaign without close(): say so, and leave no term unwatched.
        LOG.error(
            "Election {}: the campaign thread was interrupted; {}it no longer campaigns",
            config.name(),
            held != null ? "stepping down (the lease is not lost: no halt) and " : "");
        Term term = endTerm();
        if (term != null) {
          Interrupts interrupts = new Interrupts();
          interrupts.clear(); // the interrupt that ended the campaign must not fail the release
          try {
            stopGracefully(term, interrupts);
          } finally {
            interrupts.restore();
          }
        }
      }
    } catch (Error e) {
      // Not swallowed: the thread ends. But not silently, and not leaving a term nobody watches.
      boolean leading = held != null;
      if (leading) {
        try {
          // The thread ends here: it waits for the work and releases before it does.
          stepDownOnLoss(new Loss("the campaign thread ends on " + e, null), false);
        } catch (Throwable stepDownFailed) {
          e.addSuppressed(stepDownFailed);
        }
      }
      LOG.error(
          "Election {}: the campaign thread ends on {}{}",
          config.name(),
          e.toString(),
          leading ? "; it stepped down first" : "",
          e);
      throw e;
    }
  }

  private boolean isClosed() {
    mutex.lock();
    try {
      return closed;
    } finally {
      mutex.unlock();
    }
  }

  private void campaign() {
    // The flag too: a callback on this thread that was interrupted (onNewLeader, onStoppedLeading)
    // leaves it set, and the loop ends on it as on an interrupted wait.
    while (running && !Thread.currentThread().isInterrupted()) {
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
          Loss loss = lossOf(current);
          if (loss != null) {
            stepDownOnLoss(loss, true);
          } else {
            // Wake when the deadline passes, not at the next poll after it: a renewal that
            // succeeds meanwhile only makes this check find it met.
            pause(min(config.retryPeriod(), untilRenewDeadline(current)));
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
   * Why the term of {@code lease} is over, or null while it holds: a renewal refused (the lease is
   * lost), a renewal that failed with an unexpected exception, no renewal for {@code
   * renewDeadline}, or the work released the lease itself (not a loss: {@link Loss#released}).
   */
  private Loss lossOf(HeldLock lease) {
    RenewalFailure failure = renewalFailure.get();
    if (failure != null
        && failure.token().equals(lease.token())
        && renewalFailure.compareAndSet(failure, null)) {
      return new Loss("a renewal of the lease failed on an unexpected exception", failure.cause());
    }
    if (lease.isLost()) {
      return new Loss("the lease was lost", null);
    }
    if (!lease.isHeld()) {
      return Loss.RELEASED;
    }
    Duration sinceRenewal = config.leaseDuration().minus(lease.deadline().remaining());
    if (sinceRenewal.compareTo(config.renewDeadline()) >= 0) {
      return new Loss(
          "no renewal for "
              + sinceRenewal.toMillis()
              + " ms (renewDeadline "
              + config.renewDeadline().toMillis()
              + " ms)",
          null);
    }
    return null;
  }

  /**
   * Why a term ended; {@code unexpected} is a failure other than {@link
   * BackendUnavailableException}, counted as {@code nolock.leadership.errors} once the halt (if
   * any) has come. {@link #RELEASED} is no loss: the work gave the lease up itself (closing the
   * {@link HeldLock}, as try-with-resources does), so nothing the elector did not intend happened
   * to it, and nothing halts.
   */
  private record Loss(String reason, Throwable unexpected) {
    static final Loss RELEASED =
        new Loss("the leader's work released its own lease; the term ends", null);

    boolean released() {
      return this == RELEASED;
    }
  }

  private Duration untilRenewDeadline(HeldLock lease) {
    Duration sinceRenewal = config.leaseDuration().minus(lease.deadline().remaining());
    return config.renewDeadline().minus(sinceRenewal);
  }

  /**
   * A backend that answers wrongly rather than not at all (a missing table, a malformed lease item,
   * a key of another type): the campaign must outlive it, or a follower never campaigns again and a
   * leader's work runs on with no one watching its lease. A leader steps down, since what it knows
   * of its term can no longer be trusted.
   */
  private void survive(String what, Throwable e) {
    if (held != null) {
      try {
        stepDownOnLoss(new Loss(what + " on an unexpected exception", e), true); // halts first
      } catch (RuntimeException stepDownFailed) {
        LOG.error("Election {}: stepping down threw", config.name(), stepDownFailed);
      }
      return;
    }
    errors.increment();
    LOG.error("Election {}: {} on an unexpected exception; campaigning on", config.name(), what, e);
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
   * Step 3, item 6, of the class's algorithm: one wait for a lost term's work to end, which wakes
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
    // An interrupt it threw stays this thread's: the campaign loop sees it and ends.
    Listener.tell(leadership::onNewLeader, leader)
        .forEach(e -> LOG.error("Election {}: onNewLeader threw", config.name(), e));
  }

  private void lead(HeldLock got) {
    leaderSinceNanos = config.clock().nanoTime();
    boolean afterClose;
    mutex.lock();
    try {
      afterClose = closed;
      if (!afterClose) {
        held = got; // before any callback: an Error in one must find a term to step down
      }
    } finally {
      mutex.unlock();
    }
    if (afterClose) {
      // An acquire close() stopped waiting for: nobody would end this term.
      release(got);
      return;
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
            own(
                () -> {
                  try {
                    leadership.onStartedLeading(got);
                  } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                  } catch (Exception e) {
                    // Checked or not, the failure of this term's work only: the elector goes on.
                    LOG.error("Election {}: the leader's work failed", config.name(), e);
                  } finally {
                    ended.countDown();
                    signal(); // a campaign or a release waiting for this work may go on
                  }
                }),
            "nolock-leader-" + config.name());
    thread.setDaemon(true);
    mutex.lock();
    try {
      if (held != got) {
        return; // a close() ended the term meanwhile, and released it
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
   * Steps down after a loss (step 3 of the class's algorithm): interrupt, log, halt, then count,
   * onStoppedLeading, and the release once the work has ended or overrun {@code workStopTimeout}:
   * on the release thread when {@code inBackground}, else on this one before it returns. The
   * release happens whatever onStoppedLeading throws.
   */
  private void stepDownOnLoss(Loss loss, boolean inBackground) {
    Term term = endTerm();
    if (term == null) {
      return;
    }
    Work lost = term.work();
    if (lost != null) {
      lost.thread().interrupt();
    }
    long since = config.clock().nanoTime();
    boolean handedOver = false;
    try {
      if (loss.released()) {
        LOG.warn(
            "Election {}: {}: {} steps down (not a loss: no halt)",
            config.name(),
            loss.reason(),
            config.identity());
      } else {
        try {
          // The one line that says why a halted process died; nothing else comes before the halt.
          LOG.error(
              "Election {}: {} lost leadership{}: {}",
              config.name(),
              config.identity(),
              config.haltOnLoss() ? ", halting the process" : "",
              loss.reason(),
              loss.unexpected());
        } finally {
          // Even when the logger throws (a full disk, a broken appender).
          if (config.haltOnLoss()) {
            config.halt().run();
          }
        }
      }
      if (lost != null) {
        lostWork = new LostWork(lost, since);
      }
      if (!loss.released()) {
        losses.increment();
      }
      leading.record(Duration.ofNanos(since - leaderSinceNanos));
      if (loss.unexpected() != null) {
        errors.increment();
      }
      if (lost != null) {
        stopped(); // never for a term whose onStartedLeading was not called
      }
      if (inBackground) {
        try {
          releases.execute(() -> releaseAfterWork(term.lease(), lost, since));
          handedOver = true;
        } catch (RejectedExecutionException closing) {
          // close() stopped waiting for this thread and shut the release thread down: release here.
        }
      }
    } finally {
      if (!handedOver) {
        releaseAfterWork(term.lease(), lost, since);
      }
    }
  }

  /**
   * Without a halt, work that ignores the interrupt may still run after a loss while the server
   * still holds the lease (renewDeadline passed, or a backend error): releasing at once would let a
   * successor start beside it. So the release waits, as close() does.
   */
  private void releaseAfterWork(HeldLock lease, Work lost, long sinceNanos) {
    try {
      if (lost != null && !awaitEnd(lost, sinceNanos)) {
        overrun(
            lost,
            "releasing the lost term's lease anyway: a successor may start while it runs, and only"
                + " the fence refuses its writes");
      }
    } finally {
      release(lease);
    }
  }

  /**
   * Step 4 of the class's algorithm, after campaigning stopped: interrupt the work, call
   * onStoppedLeading, wait for the work, release; the lease is watched from the interrupt until the
   * work ended or the wait gave up, onStoppedLeading included (it may wait for the work). The
   * interrupt flag is cleared after each wait and remembered in {@code interrupts}, so that
   * onStoppedLeading and the release never run with it set. A work thread that closes its own
   * elector is neither interrupted nor waited for.
   */
  private void stopGracefully(Term term, Interrupts interrupts) {
    Work stopping = term.work();
    boolean self = stopping != null && isCurrent(stopping);
    Watch watch = null;
    try {
      if (stopping != null && !self) {
        stopping.thread().interrupt();
      }
      long since = config.clock().nanoTime();
      if (stopping != null) {
        watch = new Watch(term.lease(), stopping);
        watch.start();
      }
      try {
        if (stopping != null) {
          stopped(); // never for a term whose onStartedLeading was not called
        }
      } finally {
        interrupts.clear();
        if (stopping != null && !self) {
          boolean ended = awaitEnd(stopping, since);
          interrupts.clear();
          if (!ended) {
            overrun(
                stopping,
                "releasing the lease anyway: a successor may start while it runs, and only the"
                    + " fence refuses its writes");
          }
        }
      }
    } finally {
      try {
        if (watch != null) {
          interrupts.add(watch.stop());
        }
      } finally {
        leading.record(Duration.ofNanos(config.clock().nanoTime() - leaderSinceNanos));
        release(term.lease());
      }
    }
  }

  private static boolean isCurrent(Work work) {
    return work.thread() == Thread.currentThread();
  }

  /**
   * Waits until {@code work} has ended, at most {@code workStopTimeout} from {@code sinceNanos} on
   * the elector's clock; true when it has. Interrupts do not shorten it (the flag is set again on
   * return). A work thread waiting for itself returns at once.
   */
  private boolean awaitEnd(Work work, long sinceNanos) {
    if (isCurrent(work)) {
      return false;
    }
    boolean interrupted =
        awaitUninterruptibly(() -> !work.running(), config.workStopTimeout(), sinceNanos);
    boolean ended = !work.running();
    if (ended) {
      // It has returned; what is left is its signal, which needs the mutex this no longer holds.
      interrupted |= joinUninterruptibly(work.thread());
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
    return ended;
  }

  /**
   * Watches the lease of a term being stopped gracefully, on a thread of its own, while its work
   * runs and until {@link #stop}: nothing else watches it then (the campaign has stopped), and
   * onStoppedLeading, which runs meanwhile, may itself wait for the work. A lease lost meanwhile
   * (refused, {@code renewDeadline} passed, a renewal's unexpected exception) may let a successor
   * start beside that work, so {@code haltOnLoss} applies; a lease the work released itself is only
   * reported.
   */
  private final class Watch {
    private final HeldLock lease;
    private final Work work;
    private final Thread thread;
    private boolean stopped; // under mutex

    Watch(HeldLock lease, Work work) {
      this.lease = lease;
      this.work = work;
      this.thread = new Thread(own(this::watch), "nolock-elector-stopping-" + config.name());
      thread.setDaemon(true);
    }

    void start() {
      thread.start();
    }

    /** Ends the watch and waits for its thread; returns whether an interrupt came meanwhile. */
    boolean stop() {
      mutex.lock();
      try {
        stopped = true;
        wake.signalAll();
      } finally {
        mutex.unlock();
      }
      return joinUninterruptibly(thread);
    }

    private void watch() {
      mutex.lock();
      try {
        while (!stopped && work.running()) {
          Loss loss = lossOf(lease);
          if (loss != null) {
            mutex.unlock();
            try {
              lostWhileStopping(loss);
            } finally {
              mutex.lock();
            }
            return;
          }
          config.pause().await(wake, untilRenewDeadline(lease));
        }
      } catch (InterruptedException e) {
        // Only the process ending interrupts this thread.
      } finally {
        mutex.unlock();
      }
    }
  }

  /** The lease of a term being stopped gracefully ended while its work still ran. */
  private void lostWhileStopping(Loss loss) {
    if (loss.released()) {
      LOG.warn(
          "Election {}: {} while it was being stopped (not a loss: no halt)",
          config.name(),
          loss.reason());
      return;
    }
    try {
      LOG.error(
          "Election {}: {} lost leadership while its term was being stopped and its work still"
              + " ran{}: {}",
          config.name(),
          config.identity(),
          config.haltOnLoss() ? ", halting the process" : "",
          loss.reason(),
          loss.unexpected());
    } finally {
      // Even when the logger throws (a full disk, a broken appender).
      if (config.haltOnLoss()) {
        config.halt().run();
      }
    }
    losses.increment();
    if (loss.unexpected() != null) {
      errors.increment();
    }
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

  /**
   * Calls onStoppedLeading. What it throws is logged; an {@link Error} is rethrown, and the callers
   * release in {@code finally} blocks, so that it never leaves a lease renewed for ever.
   */
  private void stopped() {
    try {
      // An interrupt it threw stays this thread's: close() sets it again on return, and the
      // campaign loop ends on it.
      Listener.tell(ignored -> leadership.onStoppedLeading(), null)
          .forEach(e -> LOG.error("Election {}: onStoppedLeading threw", config.name(), e));
    } catch (Error e) {
      LOG.error("Election {}: onStoppedLeading threw", config.name(), e);
      throw e;
    } catch (Throwable e) { // neither Exception nor Error: only a sneaky throw gets here
      LOG.error("Election {}: onStoppedLeading threw", config.name(), e);
    }
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

  /** {@code task}, marked as running on one of the elector's own threads. */
  private Runnable own(Runnable task) {
    return () -> {
      ownThread.set(true);
      task.run();
    };
  }

  /**
   * The interrupts a thread saw while it stopped a term: cleared after each wait, so that
   * onStoppedLeading and the backend's release never run with the flag set (blocking calls would
   * throw at once, and etcd's and Redis's clients fail), and set again when it is done.
   */
  private static final class Interrupts {
    private boolean seen;

    /** Takes the current thread's flag, if set. */
    void clear() {
      seen |= Thread.interrupted();
    }

    void add(boolean interrupted) {
      seen |= interrupted;
    }

    void restore() {
      clear();
      if (seen) {
        Thread.currentThread().interrupt();
      }
    }
  }

  /**
   * Joins {@code thread}, which has done its work and has only its exit left, through interrupts;
   * returns whether one came, for the caller to set the flag again once it is done.
   */
  private static boolean joinUninterruptibly(Thread thread) {
    boolean interrupted = false;
    while (thread.isAlive()) {
      try {
        thread.join();
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    return interrupted;
  }

  private static void awaitUninterruptibly(CountDownLatch latch) {
    boolean interrupted = false;
    while (latch.getCount() > 0) {
      try {
        latch.await();
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
    }
  }

  /**
   * Waits for the release thread, at most {@code timeout} of real time ({@code System.nanoTime},
   * not the elector's clock: it bounds backend calls, which no injected clock slows or speeds).
   */
  private void awaitTermination(ExecutorService executor, Duration timeout) {
    boolean interrupted = false;
    long deadline = System.nanoTime() + timeout.toNanos();
    while (!executor.isTerminated()) {
      long left = deadline - System.nanoTime();
      if (left <= 0) {
        LOG.warn(
            "Election {}: a lost term's release still runs after {} ms; it expires after its TTL",
            config.name(),
            timeout.toMillis());
        break;
      }
      try {
        executor.awaitTermination(left, TimeUnit.NANOSECONDS);
      } catch (InterruptedException e) {
        interrupted = true;
      }
    }
    if (interrupted) {
      Thread.currentThread().interrupt();
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
