package dev.nolock.queue;

import io.vavr.control.Option;
import java.time.Instant;
import java.util.Objects;

/**
 * Why an administrative call ({@link QueueAdmin}) changed nothing: the {@code Left} of its {@code
 * Either}. A value, not an exception; each call narrows it to the cases it can meet ({@link
 * CancelRefusal}, {@link RescheduleRefusal}, {@link RetryRefusal}), so a {@code switch} over them
 * is exhaustive.
 */
public sealed interface AdminRefusal
    permits AdminRefusal.CancelRefusal, AdminRefusal.RescheduleRefusal, AdminRefusal.RetryRefusal {

  /** The job the call named. */
  long jobId();

  /** One line for logs and operators: what was refused and why. */
  String describe();

  /** Why {@link QueueAdmin#cancel} refused. */
  sealed interface CancelRefusal extends AdminRefusal
      permits UnknownJob, Running, AlreadyFinished {}

  /** Why {@link QueueAdmin#reschedule} refused. */
  sealed interface RescheduleRefusal extends AdminRefusal permits UnknownJob, NotReady, InThePast {}

  /** Why {@link QueueAdmin#retry} refused. */
  sealed interface RetryRefusal extends AdminRefusal permits UnknownJob, UniqueKeyInUse {}

  /**
   * No job with this id in this queue: it never existed, or retention purged it (a finished job; a
   * purged cancelled job included, so a cancel resent after the purge lands here).
   */
  record UnknownJob(long jobId) implements CancelRefusal, RescheduleRefusal, RetryRefusal {
    @Override
    public String describe() {
      return "Job "
          + jobId
          + " is not in this queue: it never existed, or retention purged it after it finished.";
    }
  }

  /**
   * The job is claimed: a worker runs it under {@code attempt}. A running job is never cancelled:
   * the claim won.
   */
  record Running(long jobId, long attempt) implements CancelRefusal {
    @Override
    public String describe() {
      return "Job "
          + jobId
          + " was not cancelled: a worker runs it (attempt "
          + attempt
          + "). Wait for it to finish, or make its handler check whether it should still run.";
    }
  }

  /**
   * The job finished before the cancel: {@link JobState#DONE} or {@link JobState#DEAD}. A dead job
   * stays a dead letter: retry it, or leave it to your own clean-up.
   */
  record AlreadyFinished(long jobId, JobState state) implements CancelRefusal {
    public AlreadyFinished {
      Objects.requireNonNull(state, "state");
    }

    @Override
    public String describe() {
      return "Job " + jobId + " was not cancelled: it is " + state.sqlValue() + " already.";
    }
  }

  /**
   * The job is not {@link JobState#READY}: claimed, finished or cancelled; only a waiting job can
   * be rescheduled.
   */
  record NotReady(long jobId, JobState state) implements RescheduleRefusal {
    public NotReady {
      Objects.requireNonNull(state, "state");
    }

    @Override
    public String describe() {
      return "Job "
          + jobId
          + " was not rescheduled: it is "
          + state.sqlValue()
          + ", and only a ready job can be.";
    }
  }

  /**
   * The requested time is not after the database's clock ({@code databaseNow}); nothing changed.
   * Ask for a later time (a job due now needs no rescheduling).
   */
  record InThePast(long jobId, Instant requested, Instant databaseNow)
      implements RescheduleRefusal {
    public InThePast {
      Objects.requireNonNull(requested, "requested");
      Objects.requireNonNull(databaseNow, "databaseNow");
    }

    @Override
    public String describe() {
      return "Job "
          + jobId
          + " was not rescheduled: "
          + requested
          + " is not after the database's clock ("
          + databaseNow
          + ").";
    }
  }

  /**
   * The dead letter's unique key is taken by a live (ready or running) job, {@code heldBy} when it
   * could still be read; reviving it would break the key's promise of one pending job. Wait for
   * that job, or enqueue the payload again without the key.
   */
  record UniqueKeyInUse(long jobId, String uniqueKey, Option<Long> heldBy) implements RetryRefusal {
    public UniqueKeyInUse {
      Objects.requireNonNull(uniqueKey, "uniqueKey");
      Objects.requireNonNull(heldBy, "heldBy");
    }

    @Override
    public String describe() {
      return "Dead job "
          + jobId
          + " was not retried: its unique key \""
          + uniqueKey
          + "\" is taken by "
          + heldBy.map(id -> "job " + id).getOrElse("another job")
          + ", which is ready or running.";
    }
  }
}
