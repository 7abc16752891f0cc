package dev.nolock.schedule.internal;

import dev.nolock.patterns.ErrorDescriber;
import dev.nolock.patterns.Listener;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.schedule.RunOutcome;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The timer and the lifecycle: a single-threaded {@link ScheduledExecutorService} that wakes at the
 * next scheduled time (a delay computed from the wall clock, at most a minute, re-checked on
 * waking), runs a pass and schedules the next wake; between wakes it scans for expired runs every
 * lease. A failed pass is retried with backoff (at most a third of the lease). Nothing spins.
 */
final class Loop {

  private static final Logger LOG = LoggerFactory.getLogger(Loop.class);

  /** The longest the loop sleeps before it reads the wall clock again. */
  private static final Duration MAX_SLEEP = Duration.ofMinutes(1);

  private final JobContext ctx;
  private final PassState state;
  private final Engine engine;
  private final Renewals renewals;
  private final RetryPolicy passRetry;

  private final Object lifecycle = new Object();
  private ScheduledExecutorService ticker;
  private volatile Thread tickerThread;

  /** Touched by the ticker thread only. */
  private int failedPasses;

  Loop(JobContext ctx, PassState state, Engine engine, Renewals renewals) {
    this.ctx = ctx;
    this.state = state;
    this.engine = engine;
    this.renewals = renewals;
    Duration maxBackoff = ctx.config().lease().dividedBy(3);
    this.passRetry =
        RetryPolicy.custom()
            .baseDelay(Duration.ofMillis(Math.min(500, maxBackoff.toMillis())))
            .maxDelay(maxBackoff)
            .build();
  }

  void start() {
    synchronized (lifecycle) {
      if (state.closing) {
        throw new IllegalStateException("The scheduler of job \"" + ctx.job() + "\" is closed.");
      }
      if (ticker != null) {
        throw new IllegalStateException(
            "The scheduler of job \"" + ctx.job() + "\" is already started.");
      }
      ticker = executor("nolock-schedule-" + ctx.job(), false);
      ticker.execute(() -> tickerThread = Thread.currentThread());
      scheduleWake(Duration.ZERO);
      long scan = ctx.config().lease().toMillis();
      ticker.scheduleWithFixedDelay(this::scan, scan, scan, TimeUnit.MILLISECONDS);
    }
  }

  private void wake() {
    if (state.closing) {
      return;
    }
    Duration next = null;
    try {
      deliver(engine.runDueNow());
      failedPasses = 0;
    } catch (RuntimeException e) {
      failedPasses++;
      next = passRetry.backoff(failedPasses, ThreadLocalRandom.current());
      LOG.warn("Job {}: a pass failed; retrying in {}", ctx.job(), next, e);
    } finally {
      if (!state.closing) {
        scheduleWake(next);
      }
    }
  }

  private void scan() {
    if (state.closing) {
      return;
    }
    try {
      deliver(engine.scan());
    } catch (RuntimeException e) {
      LOG.warn("Job {}: the scan for expired runs failed", ctx.job(), e);
    }
  }

  /** Schedules the next pass: after {@code retry} when given, else at the next scheduled time. */
  private void scheduleWake(Duration retry) {
    Instant now = ctx.config().clock().instant();
    Duration delay;
    if (retry != null) {
      delay = retry;
    } else {
      Engine.NextWake wake = engine.nextWake(now);
      Optional<Instant> next = ctx.config().schedule().nextAfter(wake.from()).toJavaOptional();
      if (next.isEmpty()) {
        LOG.info(
            "Job {}: the schedule {} has no further times", ctx.job(), ctx.config().schedule());
        return;
      }
      // One millisecond late rather than early; an early wake finds nothing due and schedules
      // itself again. The delay runs on the monotonic clock, so a long one is cut to re-read the
      // wall clock at least every MAX_SLEEP (NTP steps, a suspended machine).
      delay = Duration.between(now, next.get()).plusMillis(1);
      Duration untilDue = wake.untilAheadDue();
      if (untilDue != null && untilDue.plusMillis(1).compareTo(delay) < 0) {
        delay = untilDue.plusMillis(1); // a time refused as ahead is due by the database then
      }
      if (delay.compareTo(MAX_SLEEP) > 0) {
        delay = MAX_SLEEP;
      }
    }
    long millis = Math.max(0, delay.toMillis());
    try {
      ticker.schedule(this::wake, millis, TimeUnit.MILLISECONDS);
    } catch (RejectedExecutionException e) {
      // closed meanwhile
    }
  }

  private void deliver(List<RunOutcome> outcomes) {
    for (RunOutcome outcome : outcomes) {
      // The listener's failure only: the loop delivers the next outcome and goes on. An interrupt
      // it threw (close() interrupting the pass) stays this thread's: the next outcomes are told
      // with the flag set, and the executor, shut down, runs nothing after this pass.
      Listener.tell(ctx.config().onOutcome(), outcome)
          .forEach(
              e -> {
                ctx.metrics().listenerFailed();
                // The listener is your code: its message goes through the describer.
                LOG.warn(
                    "Job {}: the outcome listener threw {} on {}",
                    ctx.job(),
                    ErrorDescriber.describe(ctx.config().errorDescriber(), e),
                    outcome);
              });
    }
  }

  /**
   * Stops the loop: no new pass starts, a running job is waited for up to the shutdown timeout (its
   * lease is renewed meanwhile), then interrupted. Idempotent.
   */
  void close() {
    ScheduledExecutorService loop;
    synchronized (lifecycle) {
      if (state.closing) {
        return;
      }
      state.closing = true;
      loop = ticker;
    }
    Duration shutdownTimeout = ctx.config().shutdownTimeout();
    try {
      if (loop != null) {
        loop.shutdown();
        if (Thread.currentThread() != tickerThread
            && !loop.awaitTermination(shutdownTimeout.toMillis(), TimeUnit.MILLISECONDS)) {
          LOG.warn(
              "Job {}: the running job did not end within {}; interrupting it",
              ctx.job(),
              shutdownTimeout);
          loop.shutdownNow();
          loop.awaitTermination(10, TimeUnit.SECONDS);
        }
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      if (loop != null) {
        loop.shutdownNow();
      }
    } finally {
      renewals.shutdown();
    }
  }

  /** One thread that runs nothing after shutdown and forgets cancelled tasks. */
  static ScheduledExecutorService executor(String threadName, boolean daemon) {
    ScheduledThreadPoolExecutor executor =
        new ScheduledThreadPoolExecutor(
            1,
            r -> {
              Thread thread = new Thread(r, threadName);
              thread.setDaemon(daemon);
              return thread;
            });
    executor.setExecuteExistingDelayedTasksAfterShutdownPolicy(false);
    executor.setContinueExistingPeriodicTasksAfterShutdownPolicy(false);
    executor.setRemoveOnCancelPolicy(true);
    return executor;
  }
}
