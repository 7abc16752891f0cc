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
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
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
 *   <li>The leader steps down as soon as a renewal is refused, or when it has not renewed for
 *       {@code renewDeadline} — before its {@code leaseDuration} can expire, so that no successor
 *       starts while it still works. Stepping down interrupts the work thread, calls {@link
 *       Leadership#onStoppedLeading}, and by default halts the process: a leader that keeps running
 *       after losing its lease is the failure, and client-go's {@code os.Exit(1)} in {@code
 *       OnStoppedLeading} exists for that reason.
 *   <li>{@link #close()} steps down gracefully: releases the lease (a successor need not wait for
 *       it to expire) and does not halt.
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
 *       OutOfMemoryError}) is logged at error level, steps down a leader (no one would watch its
 *       term after the thread ends), and is rethrown: the campaign thread ends; the elector is not
 *       campaigning any more. An {@code Error} thrown by a renewal is handled as in step 5.
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
  private final Timer leading;

  /**
   * The last renewal that failed with anything but {@link BackendUnavailableException}, with the
   * token of the term it renewed; the campaign loop takes it.
   */
  private final AtomicReference<RenewalFailure> renewalFailure = new AtomicReference<>();

  private record RenewalFailure(FencingToken token, Throwable cause) {}

  private volatile boolean running = true;
  private volatile HeldLock held;
  private volatile long leaderSinceNanos;
  private String observedLeader; // only the loop thread touches it
  private Thread work;

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

  /** Steps down if leading (releasing the lease, without halting) and stops campaigning. */
  @Override
  public void close() {
    running = false;
    signal();
    try {
      loop.join(TimeUnit.SECONDS.toMillis(30));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    stepDown(null);
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
          stepDown("the campaign thread ended on " + e);
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
        if (current == null) {
          Option<HeldLock> got = lock.tryAcquire(config.name(), config.leaseDuration());
          if (got.isDefined()) {
            lead(got.get());
          } else {
            // The lease names the leader's grant; observers want the candidate behind it. A grant
            // of this candidate's own that it does not hold (an acquire whose answer was lost)
            // leads nobody: it is not reported, and it ends within one lease duration.
            backend
                .holder(config.name())
                .map(h -> GrantOwner.processOf(h.owner()))
                .filter(leader -> !leader.equals(config.identity()))
                .forEach(this::observe);
            pause(jittered(config.retryPeriod()));
          }
        } else {
          RenewalFailure failure = renewalFailure.getAndSet(null);
          Duration sinceRenewal = config.leaseDuration().minus(current.deadline().remaining());
          if (failure != null && failure.token().equals(current.token())) {
            survive("a renewal of the lease failed", failure.cause());
            pause(jittered(config.retryPeriod()));
          } else if (!current.isHeld()) {
            stepDown("the lease was lost");
          } else if (sinceRenewal.compareTo(config.renewDeadline()) > 0) {
            stepDown(
                "no renewal for "
                    + sinceRenewal.toMillis()
                    + " ms (renewDeadline "
                    + config.renewDeadline().toMillis()
                    + " ms)");
          } else {
            pause(config.retryPeriod());
          }
        }
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
        stepDown(what + ": " + e);
      } catch (RuntimeException stepDownFailed) {
        LOG.error("Election {}: stepping down threw", config.name(), stepDownFailed);
      }
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
    held = got;
    leaderSinceNanos = config.clock().nanoTime();
    changes.increment();
    LOG.info(
        "Election {}: {} leads with token {}",
        config.name(),
        config.identity(),
        got.lease().token().value());
    observe(config.identity());
    Thread thread =
        new Thread(
            () -> {
              try {
                leadership.onStartedLeading(got);
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
              } catch (RuntimeException e) {
                LOG.error("Election {}: the leader's work failed", config.name(), e);
              }
            },
            "nolock-leader-" + config.name());
    thread.setDaemon(true);
    mutex.lock();
    try {
      work = thread;
    } finally {
      mutex.unlock();
    }
    thread.start();
  }

  /**
   * Ends this term: {@code reason} null means a graceful close (release, no halt); otherwise the
   * leadership was lost.
   */
  private void stepDown(String reason) {
    HeldLock current = held;
    if (current == null) {
      return;
    }
    held = null;
    Thread thread;
    mutex.lock();
    try {
      thread = work;
      work = null;
    } finally {
      mutex.unlock();
    }
    if (thread != null) {
      thread.interrupt();
    }
    leading.record(Duration.ofNanos(config.clock().nanoTime() - leaderSinceNanos));
    try {
      current.release();
    } catch (RuntimeException e) {
      LOG.warn("Election {}: could not release; it expires after its TTL", config.name(), e);
    }
    try {
      leadership.onStoppedLeading();
    } catch (RuntimeException e) {
      LOG.error("Election {}: onStoppedLeading threw", config.name(), e);
    }
    if (reason != null) {
      losses.increment();
      LOG.error("Election {}: {} lost leadership: {}", config.name(), config.identity(), reason);
      if (config.haltOnLoss()) {
        config.halt().run();
      }
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
      if (running) {
        wake.awaitNanos(duration.toNanos());
      }
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
