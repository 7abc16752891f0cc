package dev.nolock.patterns;

import java.time.Duration;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The timer every nolock component that keeps a lease alive runs its renewals (and expiry watches)
 * on: one named daemon thread, tasks that can be cancelled one by one, and a close that stops them
 * all.
 *
 * <p>Guarantee: the thread never keeps the JVM alive (daemon) and names itself in thread dumps; a
 * cancelled task leaves the queue at once, so a process that takes and drops many leases holds no
 * dead timers; a repeating task that throws keeps its schedule (the failure is logged), where a
 * bare {@link ScheduledThreadPoolExecutor} would silently stop it and the lease would lapse
 * unrenewed; after {@link #close} nothing runs again and scheduling throws {@link
 * RejectedExecutionException}, so a caller racing a close learns its task was not scheduled.
 *
 * <p>Algorithm:
 *
 * <ol>
 *   <li>One {@link ScheduledThreadPoolExecutor} with one daemon thread named as given, with
 *       remove-on-cancel.
 *   <li>{@link #repeat}: {@code scheduleWithFixedDelay}, the first run one interval after the call,
 *       each next one an interval after the previous ended (a renewal that hung is not followed by
 *       a burst); the task runs inside a guard that logs and swallows a {@link RuntimeException}.
 *   <li>{@link #once}: {@code schedule} after the delay.
 *   <li>{@link #close}: {@code shutdownNow}: queued tasks are dropped, a running one is
 *       interrupted.
 * </ol>
 *
 * Thread-safe. A slow task delays the others on the same scheduler: use one scheduler per kind of
 * task whose delay must not hold up another (a renewal that hangs on a dead network must not delay
 * the watch that tells the holder its lease ran out).
 */
public final class RenewalScheduler implements AutoCloseable {

  private static final Logger LOG = LoggerFactory.getLogger(RenewalScheduler.class);

  private final String threadName;
  private final ScheduledThreadPoolExecutor executor;

  private RenewalScheduler(String threadName) {
    this.threadName = threadName;
    this.executor =
        new ScheduledThreadPoolExecutor(
            1,
            runnable -> {
              Thread thread = new Thread(runnable, threadName);
              thread.setDaemon(true);
              return thread;
            });
    executor.setRemoveOnCancelPolicy(true);
  }

  /**
   * A scheduler whose one thread is named {@code threadName}.
   *
   * @throws IllegalArgumentException when {@code threadName} is null or blank
   */
  public static RenewalScheduler named(String threadName) {
    if (threadName == null || threadName.isBlank()) {
      throw new IllegalArgumentException(
          "The thread name is blank: pass one that says what the thread renews, e.g."
              + " \"nolock-lock-renewal\".");
    }
    return new RenewalScheduler(threadName);
  }

  /**
   * Runs {@code task} every {@code interval}, the first time one interval from now.
   *
   * @return the handle that cancels it
   * @throws IllegalArgumentException when an argument is null or the interval is not positive
   * @throws RejectedExecutionException when the scheduler was closed
   */
  public ScheduledFuture<?> repeat(Runnable task, Duration interval) {
    requireTask(task);
    if (interval == null || interval.isZero() || interval.isNegative()) {
      throw new IllegalArgumentException(
          "The interval is " + interval + ": pass a positive duration.");
    }
    long nanos = interval.toNanos();
    return executor.scheduleWithFixedDelay(() -> guarded(task), nanos, nanos, TimeUnit.NANOSECONDS);
  }

  /**
   * Runs {@code task} once, {@code delay} from now.
   *
   * @return the handle that cancels it
   * @throws IllegalArgumentException when an argument is null or the delay is negative
   * @throws RejectedExecutionException when the scheduler was closed
   */
  public ScheduledFuture<?> once(Runnable task, Duration delay) {
    requireTask(task);
    if (delay == null || delay.isNegative()) {
      throw new IllegalArgumentException("The delay is " + delay + ": pass zero or more.");
    }
    return executor.schedule(task, delay.toNanos(), TimeUnit.NANOSECONDS);
  }

  /** How many tasks wait for their next run (a cancelled one is gone at once). */
  public int queued() {
    return executor.getQueue().size();
  }

  /** Stops every task: queued ones never run, a running one is interrupted. Idempotent. */
  @Override
  public void close() {
    executor.shutdownNow();
  }

  private void guarded(Runnable task) {
    try {
      task.run();
    } catch (RuntimeException e) {
      // Thrown out of a periodic task, it would end the schedule for good and the lease would
      // lapse with nobody told.
      LOG.warn("A task on {} failed; it runs again at its next interval", threadName, e);
    }
  }

  private static void requireTask(Runnable task) {
    if (task == null) {
      throw new IllegalArgumentException("The task is null: pass what to run.");
    }
  }

  @Override
  public String toString() {
    return "RenewalScheduler[" + threadName + "]";
  }
}
