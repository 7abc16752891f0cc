package dev.nolock.schedule.internal;

import dev.nolock.patterns.sql.OwnTransaction;
import java.time.Duration;

/**
 * Deletes the job's finished runs that no claim needs any more, in batches, each its own
 * transaction, so a large backlog neither holds one long transaction nor exceeds the statement
 * timeout:
 *
 * <ol>
 *   <li>{@code keep} = the larger of the caller's age and the claim window;
 *   <li>delete up to {@value #BATCH} rows of the job that are finished ({@code done} or {@code
 *       failed}) more than {@code keep} ago, scheduled further back than the claim window, and
 *       older than the job's newest row ({@link RunTable#purgeFinished});
 *   <li>repeat while a batch was full.
 * </ol>
 *
 * It takes no lock a claim takes: the claim of a time relies on the newest row (which every batch
 * keeps, as read in its own snapshot, and no later row is ever removed before it) and on the window
 * (which the database checks on every claim), so a claim in flight refuses a handled time whichever
 * of the two commits first: it sees the time's row, or the newest row after it.
 */
final class Retention {

  /** Rows deleted per transaction, at most. */
  static final int BATCH = 1000;

  private final JobContext ctx;

  Retention(JobContext ctx) {
    this.ctx = ctx;
  }

  /** Deletes what step 2 allows and returns how many rows it deleted. */
  long purgeFinishedRunsOlderThan(Duration age) {
    Duration window = ctx.config().claimWindow();
    Duration keep = age.compareTo(window) > 0 ? age : window;
    long deleted = 0;
    int batch;
    do {
      batch =
          ctx.backend(
              "delete finished runs (" + deleted + " deleted so far)",
              () ->
                  OwnTransaction.run(
                      ctx.dsl(),
                      d ->
                          ctx.checks().retentionGuards()
                              ? ctx.table().purgeFinished(d, ctx.job(), keep, window, BATCH)
                              : ctx.table().purgeAnyForNegativeControl(d, ctx.job(), age, BATCH)));
      deleted += batch;
    } while (batch == BATCH);
    return deleted;
  }
}
