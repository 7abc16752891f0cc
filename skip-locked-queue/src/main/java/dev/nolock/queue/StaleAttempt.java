package dev.nolock.queue;

import io.vavr.control.Option;
import java.util.Objects;

/**
 * A complete, fail, heartbeat or release refused because the attempt it carried is no longer the
 * job's current running attempt: the lease expired and the job was re-queued, re-claimed (a higher
 * attempt), finished, or purged. A value, not an exception: the caller lost the job and must not
 * write anything more for this attempt. Counted in {@code nolock_fence_rejections_total} and {@code
 * nolock_queue_stale_finishes_total}.
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

  /** One line for logs: which attempt was refused and what the job looks like now. */
  public String describe() {
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
        + ". Stop working on it; nothing was written for this attempt.";
  }
}
