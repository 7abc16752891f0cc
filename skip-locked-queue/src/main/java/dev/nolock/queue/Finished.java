package dev.nolock.queue;

import java.time.Instant;
import java.util.Objects;

/**
 * An attempt that was finished by its holder: completed, failed (re-queued with a backoff or
 * dead-lettered), or released.
 *
 * @param jobId the job
 * @param attempt the attempt token that finished it
 * @param state the job's state now: {@link JobState#DONE} after a completion, {@link
 *     JobState#READY} after a failure with attempts left or a release, {@link JobState#DEAD} after
 *     the last allowed attempt failed
 * @param runAt when the job may run next (database clock); for a completed or dead job, the {@code
 *     run_at} it last had
 */
public record Finished(long jobId, long attempt, JobState state, Instant runAt) {

  public Finished {
    Objects.requireNonNull(state, "state");
    Objects.requireNonNull(runAt, "runAt");
  }

  /** True when this failure dead-lettered the job. */
  public boolean isDeadLettered() {
    return state == JobState.DEAD;
  }
}
