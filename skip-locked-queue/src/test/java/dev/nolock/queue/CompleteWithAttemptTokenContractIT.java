package dev.nolock.queue;

import dev.nolock.testkit.AttemptTokenContract;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.PostgresSchema;

/**
 * testkit's {@link AttemptTokenContract} for {@link JobQueue#completeWith}, the queue's own
 * transaction holding the completion and the caller's writes (the worker pool's {@code
 * Completion.completeWith} goes through it): the writes ran and committed is {@code FINISHED}, a
 * refusal with {@link StaleAttempt#completedByThisAttempt()} is {@code ALREADY_FINISHED}, any other
 * refusal {@code STALE}. Every run of it ends in a COMMIT (a refusal commits the empty transaction),
 * so the fault goes there, on a second {@link JobQueue} of the same queue over the faulty pool.
 */
class CompleteWithAttemptTokenContractIT extends QueueAttemptContract {

  CompleteWithAttemptTokenContractIT(PostgresSchema schema) {
    super(schema);
  }

  @Override
  protected Finish finish(Job<String> attempt) {
    return completeWith(queue(attempt), attempt);
  }

  @Override
  protected Finish finishWithFault(Job<String> attempt, FaultKind kind) {
    InjectedFault commit = faults.onNextCommit(kind);
    try {
      return completeWith(queue(faults.dataSource(), attempt.queue()), attempt);
    } finally {
      commit.assertFired();
    }
  }

  private static Finish completeWith(JobQueue<String> queue, Job<String> job) {
    return queue
        .completeWith(job, tx -> record(tx, job))
        .fold(
            refused ->
                refused.completedByThisAttempt() ? Finish.ALREADY_FINISHED : Finish.STALE,
            written -> Finish.FINISHED);
  }
}
