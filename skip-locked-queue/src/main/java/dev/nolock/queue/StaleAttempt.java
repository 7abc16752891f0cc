package dev.nolock.queue;

import io.vavr.control.Option;
import java.util.Objects;

/**
 * A complete, fail, heartbeat or release refused because the attempt it carried is no longer the
 * job's current running attempt: the lease expired and the job was re-queued, re-claimed (a higher
 * attempt), finished, or purged. A value, not an exception: the call changed nothing, and the
 * caller must not write anything more for this attempt. Counted in {@code
 * nolock_fence_rejections_total} and {@code nolock_queue_stale_finishes_total}.
 *
 * <p>One case is not a lost job: {@link #completedByThisAttempt()}, the answer of a completion in a
 * transaction ({@link JobQueue#complete(org.jooq.DSLContext, Job)}, {@link JobQueue#completeWith})
 * when this same attempt completed the job before, for example in the first try of a transaction
 * whose COMMIT answer was lost. Roll back all the same: that earlier transaction's writes
 * committed.
 *
 * @param jobId the job
 * @param attempt the attempt token the refused call carried
 * @param currentState the job's state when the call was refused; empty when the row is gone
 * @param currentAttempt the job's attempt token when the call was refused; empty when gone
 */
public record StaleAttempt(
    long jobId, long attempt, Option<JobState> currentState, Option<Long> currentAttempt) {

  public StaleAttempt {
    Objects.requireNonNull(currentState, "currentState");
    Objects.requireNonNull(currentAttempt, "currentAttempt");
  }

  /**
   * True when this very attempt completed the job earlier: the job is {@code done} at this attempt.
   * Only the running attempt can complete a job, and only a claim changes the attempt, so no one
   * else can have left it so.
   */
  public boolean completedByThisAttempt() {
    return currentState.contains(JobState.DONE) && currentAttempt.contains(attempt);
  }

  /** One line for logs: which attempt was refused and what the job looks like now. */
  public String describe() {
    if (completedByThisAttempt()) {
      return "Job "
          + jobId
          + " attempt "
          + attempt
          + " was refused: this attempt completed the job already, in an earlier transaction"
          + " that committed (a retry after a lost COMMIT answer?). Roll this one back; the"
          + " earlier one's writes stand.";
    }
    if (currentState.isEmpty()) {
      return "Job "
          + jobId
          + " attempt "
          + attempt
          + " was refused: the job no longer exists"
          + " (purged).";
    }
    String why;
    if (currentAttempt.get() > attempt) {
      why = " (re-claimed after this attempt's lease expired)";
    } else if (currentState.get() == JobState.RUNNING) {
      why = " (this attempt's lease expired; the reaper will hand the job to another worker)";
    } else {
      why = "";
    }
    return "Job "
        + jobId
        + " attempt "
        + attempt
        + " was refused: the job is now "
        + currentState.get().sqlValue()
        + " at attempt "
        + currentAttempt.get()
        + why
        + ". Stop working on it; this call changed nothing.";
  }
}
