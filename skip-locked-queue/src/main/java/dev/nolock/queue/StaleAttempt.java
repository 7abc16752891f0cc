package dev.nolock.queue;

import io.vavr.control.Option;
import java.util.Objects;

/**
 * A complete, fail, heartbeat or release refused because the attempt it carried is no longer the
 * job's current running attempt: the lease expired and the job was re-queued, re-claimed (a higher
 * attempt), finished, or purged. A value, not an exception: <em>this call</em> changed nothing, and
 * the caller must not write anything more for this attempt. An earlier call of the same attempt
 * whose answer was lost may have changed the job, though: {@link #describe()} says what can still
 * be known. Counted in {@code nolock_fence_rejections_total} and {@code
 * nolock_queue_stale_finishes_total}.
 *
 * <p>Two cases are not (or not known to be) a lost job:
 *
 * <ul>
 *   <li>{@link #completedByThisAttempt()}: the answer of a completion in a transaction ({@link
 *       JobQueue#complete(org.jooq.DSLContext, Job)}, {@link JobQueue#completeWith}) when this same
 *       attempt completed the job before, for example in the first try of a transaction whose
 *       COMMIT answer was lost. Roll back all the same: that earlier transaction's writes
 *       committed.
 *   <li>{@link #jobGone()}: the job no longer exists. Retention deletes only completed jobs, so
 *       some attempt completed it, perhaps this one in an earlier call whose answer was lost:
 *       whether it did is unknown. Roll back all the same; your own writes tell whether an earlier
 *       try committed. ({@link JobQueue#complete(Job)} and {@link JobQueue#completeAll} throw
 *       {@link dev.nolock.patterns.BackendUnavailableException} for it instead.)
 * </ul>
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

  /**
   * True when the job no longer exists: purged by retention after an attempt completed it, or
   * deleted. Which attempt completed it, and so whether an earlier call of this one did, is
   * unknown.
   */
  public boolean jobGone() {
    return currentState.isEmpty();
  }

  /** One line for logs: which attempt was refused and what the job looks like now. */
  public String describe() {
    String refused = "Job " + jobId + " attempt " + attempt + " was refused: ";
    if (completedByThisAttempt()) {
      return refused
          + "this attempt completed the job already, in an earlier transaction"
          + " that committed (a retry after a lost COMMIT answer?). Roll this one back; the"
          + " earlier one's writes stand.";
    }
    if (jobGone()) {
      return refused
          + "the job no longer exists (retention purged it after an attempt completed it, or it"
          + " was deleted). Whether this attempt completed it, in an earlier call whose answer"
          + " was lost, is unknown: check your own writes. This call changed nothing.";
    }
    String why;
    if (currentAttempt.get() > attempt) {
      why =
          " (re-claimed since this attempt: its lease expired and the reaper took the job back, or"
              + " an earlier call of this attempt whose answer was lost failed or released it)";
    } else if (currentState.get() == JobState.CANCELLED) {
      why =
          " (taken back after this attempt, by the reaper when its lease expired or by an earlier"
              + " call of this attempt, then cancelled by an administrator)";
    } else if (currentState.get() == JobState.RUNNING) {
      why = " (this attempt's lease expired; the reaper will hand the job to another worker)";
    } else {
      why =
          " (taken back by the reaper after this attempt's lease expired, or failed or released"
              + " by an earlier call of this attempt)";
    }
    return refused
        + "the job is now "
        + currentState.get().sqlValue()
        + " at attempt "
        + currentAttempt.get()
        + why
        + ". Stop working on it; this call changed nothing, whatever an earlier call did.";
  }
}
