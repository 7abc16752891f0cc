package dev.nolock.queue;

import static dev.nolock.testkit.JdbcFaults.sqlContaining;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Calls whose first answer was lost ({@link JdbcFaults}: the server ran the statement or COMMIT and
 * the connection dropped before the answer), then retried, or whose job changed since in a way the
 * row no longer shows: the queue answers with the truth, or "unknown" ({@link
 * BackendUnavailableException}), never with a false definite outcome.
 */
@ExtendWith(PostgresExtension.class)
class NoFalseOutcomeAfterLostAnswerIT {

  private static final AtomicInteger QUEUES = new AtomicInteger();

  private static PostgresSchema schema;
  private static JobRows rows;
  private static JdbcFaults faults;

  @BeforeAll
  static void createSchema(PostgresSchema s) {
    schema = s;
    JobQueue.create(s.dataSource(), QueueConfig.ofDefaults("setup"), PayloadCodec.utf8())
        .createTableIfMissing();
    rows = new JobRows(s.dsl(), QueueConfig.DEFAULT_TABLE);
    // No unique key on the job: a second commit of the same effect shows as a second row.
    s.dsl().execute("CREATE TABLE payments (job_id bigint)");
    faults = JdbcFaults.pool(s.jdbcUrl());
  }

  @AfterEach
  void disarm() {
    faults.disarmAll();
  }

  @AfterAll
  static void closeFaults() {
    faults.close();
  }

  private static JobQueue<String> queue(String name) {
    return JobQueue.create(faults.dataSource(), QueueConfig.ofDefaults(name), PayloadCodec.utf8());
  }

  private static long id(EnqueueResult result) {
    return ((EnqueueResult.Enqueued) result).id();
  }

  /** Completes the job (its UPDATE's answer lost), then lets retention delete it. */
  private static void completeLosingTheAnswerThenPurge(JobQueue<String> q, Job<String> job) {
    InjectedFault lost =
        faults.onNextStatement(FaultKind.ANSWER_LOST, sqlContaining("set \"state\" = 'done'"));
    assertThat(catchThrowable(() -> q.complete(job)))
        .isInstanceOf(BackendUnavailableException.class);
    lost.assertFired();
    assertThat(rows.get(job.id()).state())
        .as("the lost completion landed")
        .isEqualTo(JobState.DONE);
    assertThat(q.purgeFinished(Duration.ZERO).deleted()).as("jobs retention deleted").isOne();
  }

  // ---------------------------------------------------------------------------------------------
  // Enqueue

  /**
   * An enqueue whose COMMIT answer is lost committed the job; before the fix the exception said
   * "nothing was enqueued": a false definite outcome. A caller who believes it enqueues again, and
   * the job runs twice (a unique key stops that only while the first job is still pending).
   */
  @Test
  void anEnqueueWhoseCommitAnswerWasLostIsNotReportedAsNothingEnqueued() {
    String name = "nf-enq-" + QUEUES.incrementAndGet();
    JobQueue<String> q = queue(name);
    InjectedFault lost = faults.onNextCommit(FaultKind.ANSWER_LOST);

    Throwable thrown = catchThrowable(() -> q.enqueue(NewJob.of("charge 10")));
    lost.assertFired();

    assertThat(thrown).isInstanceOf(BackendUnavailableException.class);
    assertThat(rows.count(name, JobState.READY)).as("jobs the lost enqueue committed").isOne();
    assertThat(thrown.getMessage())
        .as("the message of an enqueue whose job was committed (its COMMIT answer lost)")
        .doesNotContain("nothing was enqueued")
        .contains("unknown")
        .contains("Duplicate while the first is still pending");
  }

  /** The definite answer stays where it is true: an INSERT that never reached the server. */
  @Test
  void anEnqueueThatFailedBeforeItsCommitSaysNothingWasEnqueued() {
    String name = "nf-enq-" + QUEUES.incrementAndGet();
    JobQueue<String> q = queue(name);
    InjectedFault lost = faults.onNextStatement(FaultKind.REQUEST_LOST, sqlContaining("insert"));

    Throwable thrown = catchThrowable(() -> q.enqueueAll(List.of(NewJob.of("a"), NewJob.of("b"))));
    lost.assertFired();

    assertThat(thrown)
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("nothing was enqueued");
    assertThat(rows.count(name, JobState.READY)).as("jobs enqueued").isZero();
  }

  // ---------------------------------------------------------------------------------------------
  // Completions of a job that retention deleted since

  /**
   * complete(job) whose answer was lost, then retention ran before the caller's retry. Before the
   * fix the retry was told StaleAttempt ("the job no longer exists (purged) ... this call changed
   * nothing"), although the lost call completed the job: now it is "unknown".
   */
  @Test
  void aCompleteRetriedAfterRetentionPurgedItsJobIsNotAnsweredStale() {
    String name = "nf-purge-" + QUEUES.incrementAndGet();
    JobQueue<String> q = queue(name);
    q.enqueue(NewJob.of("done"));
    Job<String> job = q.claim(1).get(0);
    completeLosingTheAnswerThenPurge(q, job);

    Either<StaleAttempt, Finished> retry;
    try {
      retry = q.complete(job);
    } catch (BackendUnavailableException unknown) {
      assertThat(unknown)
          .as("the retry's exception")
          .hasMessageContaining("no longer exists")
          .hasMessageContaining("whether this attempt completed it")
          .hasMessageContaining("is unknown");
      return;
    }
    assertThat(retry.isRight())
        .as(
            "the retry of a completion that landed (job purged since), answered %s",
            retry.isLeft() ? retry.getLeft().describe() : retry.get())
        .isTrue();
  }

  /**
   * The batch form: the purged job's outcome is unknown, and the rest of the batch still completes
   * (it is committed before the call reports the unknown).
   */
  @Test
  void aBatchCompletionWithAPurgedJobCompletesTheRestAndReportsThePurgedOneUnknown() {
    String name = "nf-purge-" + QUEUES.incrementAndGet();
    JobQueue<String> q = queue(name);
    q.enqueue(NewJob.of("first"));
    Job<String> purged = q.claim(1).get(0);
    completeLosingTheAnswerThenPurge(q, purged);
    long otherId = id(q.enqueue(NewJob.of("second")));
    Job<String> other = q.claim(1).get(0);

    assertThatThrownBy(() -> q.completeAll(List.of(purged, other)))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining(purged.id() + " attempt " + purged.attempt())
        .hasMessageContaining("is unknown")
        .hasMessageContaining("The other 1 job(s) of the batch were completed");
    assertThat(rows.get(otherId).state()).as("the other job of the batch").isEqualTo(JobState.DONE);
    assertThat(q.completeAll(List.of(other)))
        .as("the other job's answer, asked again")
        .containsExactly(
            Either.right(new Finished(other.id(), other.attempt(), JobState.DONE, other.runAt())));
  }

  /**
   * The README's recipe in the caller's transaction: its first try committed (the COMMIT answer
   * lost), retention deleted the job, the retry is refused with {@link StaleAttempt#jobGone()} and
   * rolls back: one payment row. The refusal does not claim that this attempt lost the job.
   */
  @Test
  void theRecipesRetryAfterThePurgeRollsBackAndSaysTheEarlierTryIsUnknown() {
    String name = "nf-purge-" + QUEUES.incrementAndGet();
    JobQueue<String> q = queue(name);
    long id = id(q.enqueue(NewJob.of("pay")));
    Job<String> job = q.claim(1).get(0);
    InjectedFault lost = faults.onNextCommit(FaultKind.ANSWER_LOST);
    assertThat(catchThrowable(() -> payAndComplete(q, job)))
        .isInstanceOf(DataAccessException.class);
    lost.assertFired();
    assertThat(q.purgeFinished(Duration.ZERO).deleted()).as("jobs retention deleted").isOne();

    Either<StaleAttempt, Finished> retry = payAndComplete(q, job);

    assertThat(retry.isLeft()).as("the retry is refused, so its transaction rolled back").isTrue();
    assertThat(retry.getLeft().jobGone()).as("refused because the job is gone").isTrue();
    assertThat(retry.getLeft().describe())
        .contains("Whether this attempt completed it")
        .contains("unknown");
    assertThat(schema.dsl().fetchCount(schema.dsl().selectFrom("payments").where("job_id = ?", id)))
        .as("payments committed for the job")
        .isOne();
  }

  /** The README's recipe (Usage): the refusal that rolled the transaction back, or the answer. */
  private static Either<StaleAttempt, Finished> payAndComplete(
      JobQueue<String> q, Job<String> job) {
    try {
      return Either.right(
          faults
              .dsl()
              .transactionResult(
                  cfg -> {
                    DSLContext tx = cfg.dsl();
                    tx.insertInto(table(name("payments")))
                        .set(field(name("job_id")), job.id())
                        .execute();
                    return q.complete(tx, job).getOrElseThrow(JobRefused::new);
                  }));
    } catch (JobRefused e) {
      return Either.left(e.refusal);
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

  // ---------------------------------------------------------------------------------------------
  // What a refusal says

  /**
   * A release whose answer was lost handed the job back; another worker claimed it; the retry is
   * refused. Before the fix the refusal said the job was "re-claimed after this attempt's lease
   * expired" and "this call changed nothing", both read as "your release did nothing": the lease
   * never expired, and the lost release did hand the job back.
   */
  @Test
  void aReleaseRetriedAfterTheJobWasReclaimedIsNotToldItsLeaseExpired() {
    String name = "nf-release-" + QUEUES.incrementAndGet();
    JobQueue<String> q = queue(name);
    q.enqueue(NewJob.of("handed back"));
    Job<String> job = q.claim(1).get(0);
    InjectedFault lost =
        faults.onNextStatement(FaultKind.ANSWER_LOST, sqlContaining("set \"state\" = 'ready'"));
    assertThat(catchThrowable(() -> q.release(job)))
        .isInstanceOf(BackendUnavailableException.class);
    lost.assertFired();
    assertThat(q.claim(1)).as("another worker claims the released job").hasSize(1);

    Either<StaleAttempt, Finished> retry = q.release(job);

    assertThat(retry.isLeft()).as("the retry, after the job was re-claimed").isTrue();
    assertThat(retry.getLeft().describe())
        .as("the refusal of a release retried after its lost first send handed the job back")
        .doesNotContain("re-claimed after this attempt's lease expired")
        .contains("an earlier call of this attempt whose answer was lost failed or released it");
  }

  // ---------------------------------------------------------------------------------------------
  // The retry of a dead letter

  /**
   * A retry of a dead letter whose answer was lost revived the job; the resent retry names the
   * attempt the job died at, finds it no longer dead at that attempt and answers Revived by an
   * earlier call (the row keeps no trace of whose), as the README's lost-answer table says, and the
   * job was revived once: ready, failures restarted.
   */
  @Test
  void aDeadLetterRetryResentAfterALostAnswerIsAnsweredRevivedAndTheJobWasRevivedOnce() {
    String name = "nf-dead-" + QUEUES.incrementAndGet();
    JobQueue<String> q = queue(name);
    long id = id(q.enqueue(NewJob.of("poison").maxAttempts(1)));
    q.fail(q.claim(1).get(0), "boom");
    assertThat(rows.get(id).state()).isEqualTo(JobState.DEAD);
    InjectedFault lost =
        faults.onNextStatement(FaultKind.ANSWER_LOST, sqlContaining("\"state\" = 'dead'"));
    JobInfo<String> letter = q.admin().find(id).get();
    assertThat(catchThrowable(() -> q.admin().retry(letter)))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("retry it again");
    lost.assertFired();

    assertThat(q.admin().retry(letter))
        .as("the resent retry of a dead letter that the lost call revived")
        .isEqualTo(Either.right(new QueueAdmin.Revived(id, 1, false)));
    JobRows.Row revived = rows.get(id);
    assertThat(revived.state()).as("the job after the lost revival").isEqualTo(JobState.READY);
    assertThat(revived.failures()).as("its failures, restarted once").isZero();
    assertThat(rows.count(name, JobState.READY)).as("jobs of the queue").isOne();
  }
}
