package dev.nolock.queue;

import static dev.nolock.testkit.JdbcFaults.sqlContaining;
import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.AttemptTokenContract;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.PostgresSchema;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;

/**
 * testkit's {@link AttemptTokenContract} for the README's exactly-once recipe (Usage): the caller's
 * transaction writes its effect and completes the job with {@link JobQueue#complete(DSLContext,
 * Job)}, and rolls back on every refusal. Its answers: committed is {@code FINISHED}, a refusal with
 * {@link StaleAttempt#completedByThisAttempt()} is {@code ALREADY_FINISHED}, any other refusal
 * {@code STALE}; a failed COMMIT (or any other failure of the connection) is "outcome unknown".
 *
 * <p>The fault is injected into the finish's last round trip, where its answer arrives: the COMMIT
 * when the completion was accepted, and, when it was refused, the read of the job's current row that
 * the refusal is built from (a refused transaction rolls back and sends no COMMIT to lose).
 */
class QueueAttemptTokenContractIT extends QueueAttemptContract {

  QueueAttemptTokenContractIT(PostgresSchema schema) {
    super(schema);
  }

  @Override
  protected Finish finish(Job<String> attempt) {
    return payAndComplete(schema.dsl(), attempt);
  }

  @Override
  protected Finish finishWithFault(Job<String> attempt, FaultKind kind) {
    InjectedFault commit = faults.onNextCommit(kind);
    InjectedFault refusalRead =
        faults.onNextStatement(kind, sqlContaining("select \"state\", \"attempt\", \"run_at\""));
    try {
      return payAndComplete(faults.dsl(), attempt);
    } catch (DataAccessException e) {
      throw new BackendUnavailableException(
          "The caller's transaction failed with its connection (" + kind + "): outcome unknown", e);
    } finally {
      faults.disarmAll();
      assertThat(List.of(commit, refusalRead))
          .as("the fault on the finish's COMMIT or on its refusal's read fired")
          .anyMatch(InjectedFault::fired);
    }
  }

  /** The README's recipe: the effect and the completion commit together, or roll back together. */
  private Finish payAndComplete(DSLContext dsl, Job<String> job) {
    JobQueue<String> queue = queue(job);
    try {
      dsl.transaction(
          cfg -> {
            DSLContext tx = cfg.dsl();
            record(tx, job);
            // Roll back on every refusal: throwing from the transaction does.
            queue.complete(tx, job).getOrElseThrow(JobRefused::new);
          });
      return Finish.FINISHED;
    } catch (JobRefused e) {
      return e.refusal.completedByThisAttempt() ? Finish.ALREADY_FINISHED : Finish.STALE;
    }
  }

  /** The caller's exception that carries the refusal out of its transaction. */
  private static final class JobRefused extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final transient StaleAttempt refusal;

    JobRefused(StaleAttempt refusal) {
      super(refusal.describe(), null, false, false);
      this.refusal = refusal;
    }
  }
}
