package dev.nolock.schedule.internal;

import dev.nolock.patterns.RenewalScheduler;
import dev.nolock.patterns.sql.OwnTransaction;
import dev.nolock.schedule.ScheduledRun;
import java.time.Duration;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Keeps the lease of a running attempt: every third of the lease (counted from the end of the
 * previous renewal, so one that hung is not followed by a burst), on a {@link RenewalScheduler} of
 * its own, a compare-and-swap on the attempt ({@link RunTable#renew}). A refused renewal means the
 * run was taken over (or given up): it is reported as a lost lease and renewing stops; the finish
 * will be refused. A renewal that fails is counted and tried again at the next period.
 */
final class Renewals {

  private static final Logger LOG = LoggerFactory.getLogger(Renewals.class);

  private final JobContext ctx;
  private final RenewalScheduler renewer;

  Renewals(JobContext ctx) {
    this.ctx = ctx;
    // Daemon (RenewalScheduler's threads are): it only serves runs in progress, which the
    // (non-daemon) loop thread waits for.
    this.renewer = RenewalScheduler.named("nolock-schedule-renew-" + ctx.job());
  }

  /**
   * Starts renewing {@code run}'s lease; the returned action stops it. Once stopped, a renewal
   * still queued is not sent, and one already on its way proves nothing (its answer is ignored).
   */
  Runnable start(ScheduledRun run) {
    AtomicBoolean over = new AtomicBoolean();
    AtomicReference<ScheduledFuture<?>> renewal = new AtomicReference<>();
    Duration period = Duration.ofMillis(Math.max(1, ctx.config().lease().toMillis() / 3));
    synchronized (renewal) {
      renewal.set(renewer.repeat(() -> renew(run, over, renewal), period));
    }
    return () -> {
      over.set(true);
      synchronized (renewal) {
        renewal.get().cancel(false);
      }
    };
  }

  private void renew(
      ScheduledRun run, AtomicBoolean over, AtomicReference<ScheduledFuture<?>> renewal) {
    if (over.get()) {
      return;
    }
    try {
      boolean renewed =
          OwnTransaction.run(
              ctx.dsl(),
              d ->
                  ctx.table()
                      .renew(
                          d,
                          ctx.job(),
                          run.scheduledAt(),
                          run.attempt().value(),
                          ctx.config().lease(),
                          ctx.checks().renewalAttemptCheck()));
      if (over.get()) {
        return;
      }
      if (renewed) {
        ctx.metrics().renewed();
        return;
      }
      ctx.metrics().leaseLost();
      LOG.warn(
          "Job {}: the lease of {} attempt {} was lost: another instance took the run over (or it"
              + " was given up); its finish will be refused",
          ctx.job(),
          run.scheduledAt(),
          run.attempt().value());
      synchronized (renewal) {
        renewal.get().cancel(false);
      }
    } catch (RuntimeException e) {
      ctx.metrics().renewalFailed();
      LOG.warn("Job {}: could not renew the lease of {}", ctx.job(), run.scheduledAt(), e);
    }
  }

  /** Stops every renewal; called last by {@link Loop#close()}. */
  void shutdown() {
    renewer.close();
  }
}
