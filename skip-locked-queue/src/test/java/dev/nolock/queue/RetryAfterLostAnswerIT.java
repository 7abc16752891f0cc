package dev.nolock.queue;

import static dev.nolock.testkit.JdbcFaults.sqlContaining;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
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
 * A finish whose answer was lost ({@link JdbcFaults}: the server applied the statement or the
 * COMMIT, the connection dropped before the answer arrived), retried by the caller: the retry is
 * answered with the true outcome, and the effect exists once.
 */
@ExtendWith(PostgresExtension.class)
class RetryAfterLostAnswerIT {

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
    // The business ledger has no unique key on the job: a second commit of the same effect stays
    // visible as a second row instead of being refused by a constraint.
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

  /** A queue whose own statements go through the injector. */
  private static JobQueue<String> queue() {
    return JobQueue.create(
        faults.dataSource(),
        QueueConfig.ofDefaults("r" + QUEUES.incrementAndGet()),
        PayloadCodec.utf8());
  }

  private static long id(EnqueueResult result) {
    return ((EnqueueResult.Enqueued) result).id();
  }

  private static int payments(long jobId) {
    return schema.dsl().fetchCount(schema.dsl().selectFrom("payments").where("job_id = ?", jobId));
  }

  /**
   * The README's recipe (Usage): the effect and the completion commit together, or roll back
   * together; the answer, or the refusal that rolled the transaction back.
   */
  private static Either<StaleAttempt, Finished> payAndComplete(
      DSLContext dsl, JobQueue<String> receipts, Job<String> job) {
    try {
      Finished done =
          dsl.transactionResult(
              cfg -> {
                DSLContext tx = cfg.dsl();
                tx.insertInto(table(name("payments")))
                    .set(field(name("job_id")), job.id())
                    .execute();
                // Roll back on every refusal: throwing from the transaction does.
                return receipts.complete(tx, job).getOrElseThrow(JobRefused::new);
              });
      return Either.right(done);
    } catch (JobRefused e) {
      return Either.left(e.refusal());
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

    StaleAttempt refusal() {
      return refusal;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Completions in the caller's transaction

  @Test
  void aCallersTransactionRetriedAfterItsCommitAnswerWasLostCommitsItsEffectOnce() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("charge 10")));
    Job<String> job = q.claim(1).get(0);
    InjectedFault lost = faults.onNextCommit(FaultKind.ANSWER_LOST);

    // The first try commits on the server; its COMMIT answer is lost, so the caller cannot tell
    // and runs the whole transaction again.
    assertThatThrownBy(() -> payAndComplete(faults.dsl(), q, job))
        .isInstanceOf(DataAccessException.class);
    lost.assertFired();
    Either<StaleAttempt, Finished> retry = payAndComplete(faults.dsl(), q, job);

    assertThat(payments(id))
        .as("payments for the job after its transaction was retried")
        .isEqualTo(1);
    assertThat(retry.isLeft()).as("the retry is refused, so it rolls back").isTrue();
    assertThat(retry.getLeft().completedByThisAttempt())
        .as("refused because this attempt completed the job already")
        .isTrue();
    assertThat(retry.getLeft().describe()).contains("completed the job already");
    assertThat(rows.get(id).state()).isEqualTo(JobState.DONE);
  }

  @Test
  void aCallersTransactionRetriedAfterItsCommitWasLostBeforeTheServerCommitsItOnce() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("charge 15")));
    Job<String> job = q.claim(1).get(0);
    InjectedFault lost = faults.onNextCommit(FaultKind.REQUEST_LOST);

    assertThatThrownBy(() -> payAndComplete(faults.dsl(), q, job))
        .isInstanceOf(DataAccessException.class);
    lost.assertFired();
    Either<StaleAttempt, Finished> retry = payAndComplete(faults.dsl(), q, job);

    assertThat(retry.isRight()).as("the retry completes the job").isTrue();
    assertThat(payments(id)).isEqualTo(1);
    assertThat(rows.get(id).state()).isEqualTo(JobState.DONE);
  }

  @Test
  void aCallersTransactionOfAStaleAttemptIsRefusedAsStaleNotAsCompletedByIt() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("charge 20")));
    Job<String> stale = q.claim(1).get(0);
    rows.expireLease(id);
    q.reapExpired();
    Job<String> current = q.claim(1).get(0);
    assertThat(payAndComplete(schema.dsl(), q, current).isRight()).isTrue();

    Either<StaleAttempt, Finished> late = payAndComplete(schema.dsl(), q, stale);

    assertThat(late.getLeft().completedByThisAttempt()).isFalse();
    assertThat(late.getLeft().currentAttempt()).contains(2L);
    assertThat(payments(id)).isEqualTo(1);
  }

  @Test
  void completeWithRetriedAfterItsCommitAnswerWasLostWritesOnce() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("charge 30")));
    Job<String> job = q.claim(1).get(0);
    AtomicInteger writesRun = new AtomicInteger();
    InjectedFault lost = faults.onNextCommit(FaultKind.ANSWER_LOST);

    assertThatThrownBy(() -> q.completeWith(job, tx -> pay(tx, job, writesRun)))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("unknown");
    lost.assertFired();
    Either<StaleAttempt, Integer> retry = q.completeWith(job, tx -> pay(tx, job, writesRun));

    assertThat(payments(id)).as("payments for the job after completeWith was retried").isOne();
    assertThat(writesRun.get()).as("times the writes ran").isOne();
    assertThat(retry.getLeft().completedByThisAttempt()).isTrue();
  }

  private static int pay(DSLContext tx, Job<String> job, AtomicInteger writesRun) {
    writesRun.incrementAndGet();
    return tx.insertInto(table(name("payments"))).set(field(name("job_id")), job.id()).execute();
  }

  // ---------------------------------------------------------------------------------------------
  // Finishes in their own transaction

  @Test
  void completeRetriedAfterALostAnswerIsAnsweredWithTheCompletionItMade() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("done")));
    Job<String> job = q.claim(1).get(0);
    InjectedFault lost =
        faults.onNextStatement(FaultKind.ANSWER_LOST, sqlContaining("set \"state\" = 'done'"));

    assertThatThrownBy(() -> q.complete(job)).isInstanceOf(BackendUnavailableException.class);
    lost.assertFired();
    Either<StaleAttempt, Finished> retry = q.complete(job);
    List<Either<StaleAttempt, Finished>> batchRetry = q.completeAll(List.of(job));

    Finished expected = new Finished(id, 1, JobState.DONE, rows.get(id).runAt());
    assertThat(retry).as("the retried complete of this attempt").isEqualTo(Either.right(expected));
    assertThat(batchRetry).containsExactly(Either.right(expected));
  }

  @Test
  void completeAllRetriedAfterALostAnswerIsAnsweredWithTheCompletionsItMade() {
    JobQueue<String> q = queue();
    q.enqueueAll(List.of(NewJob.of("a"), NewJob.of("b")));
    List<Job<String>> jobs = q.claim(2);
    InjectedFault lost =
        faults.onNextStatement(FaultKind.ANSWER_LOST, sqlContaining("set \"state\" = 'done'"));

    assertThatThrownBy(() -> q.completeAll(jobs)).isInstanceOf(BackendUnavailableException.class);
    lost.assertFired();
    List<Either<StaleAttempt, Finished>> retry = q.completeAll(jobs);

    assertThat(retry)
        .allSatisfy(answer -> assertThat(answer.get().state()).isEqualTo(JobState.DONE));
  }

  @Test
  void failRetriedAfterALostAnswerIsAnsweredAsTheFirstCallWouldHaveBeenAndCountsOneFailure() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("flaky")));
    Job<String> job = q.claim(1).get(0);
    InjectedFault lost =
        faults.onNextStatement(
            FaultKind.ANSWER_LOST, sqlContaining("set \"failures\" = (\"failures\" + 1)"));

    assertThatThrownBy(() -> q.fail(job, "boom")).isInstanceOf(BackendUnavailableException.class);
    lost.assertFired();
    Either<StaleAttempt, Finished> retry = q.fail(job, "boom");

    JobRows.Row row = rows.get(id);
    assertThat(retry)
        .as("the retried fail of this attempt")
        .isEqualTo(Either.right(new Finished(id, 1, JobState.READY, row.runAt())));
    assertThat(row.failures()).as("failures counted").isOne();
  }

  @Test
  void aFailThatDeadLetteredTheJobIsAnsweredSoOnRetryUntilTheJobIsRevived() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("poison").maxAttempts(1)));
    Job<String> job = q.claim(1).get(0);
    InjectedFault lost =
        faults.onNextStatement(
            FaultKind.ANSWER_LOST, sqlContaining("set \"failures\" = (\"failures\" + 1)"));

    assertThatThrownBy(() -> q.fail(job, null)).isInstanceOf(BackendUnavailableException.class);
    lost.assertFired();
    Either<StaleAttempt, Finished> retry = q.fail(job, null);

    assertThat(retry)
        .as("the retried fail that dead-lettered the job")
        .isEqualTo(Either.right(new Finished(id, 1, JobState.DEAD, rows.get(id).runAt())));
    assertThat(q.admin().retry(q.admin().find(id).get()))
        .isEqualTo(Either.right(new QueueAdmin.Revived(id, 1, true)));
    assertThat(q.fail(job, null).isLeft())
        .as("a fail retried after the job was revived: the row no longer shows it")
        .isTrue();
  }

  @Test
  void releaseRetriedAfterALostAnswerIsAnsweredAsTheFirstCallWouldHaveBeen() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("later")));
    Job<String> job = q.claim(1).get(0);
    InjectedFault lost =
        faults.onNextStatement(FaultKind.ANSWER_LOST, sqlContaining("set \"state\" = 'ready'"));

    assertThatThrownBy(() -> q.release(job)).isInstanceOf(BackendUnavailableException.class);
    lost.assertFired();
    Either<StaleAttempt, Finished> retry = q.release(job);

    assertThat(retry)
        .as("the retried release of this attempt")
        .isEqualTo(Either.right(new Finished(id, 1, JobState.READY, job.runAt())));
    assertThat(rows.get(id).failures()).isZero();
    assertThat(rows.get(id).state()).isEqualTo(JobState.READY);
  }

  @Test
  void aRetryAfterTheReaperTookTheAttemptBackIsStillRefused() {
    JobQueue<String> q = queue();
    long failed = id(q.enqueue(NewJob.of("a")));
    long released = id(q.enqueue(NewJob.of("b")));
    List<Job<String>> claimed = q.claim(2);
    rows.expireLease(failed);
    rows.expireLease(released);
    assertThat(q.reapExpired()).isEqualTo(new ReapResult(2, 0));

    // The same state and attempt a fail or release would leave, but the reaper's doing.
    assertThat(q.fail(claimed.get(0), "boom").isLeft()).as("fail after the reaper").isTrue();
    assertThat(q.release(claimed.get(1)).isLeft()).as("release after the reaper").isTrue();
    assertThat(rows.get(failed).failures()).isOne();
    assertThat(rows.get(released).failures()).isOne();
  }

  @Test
  void aFailOrReleaseOfAnAttemptThatEndedOtherwiseIsRefused() {
    JobQueue<String> q = queue();
    q.enqueueAll(List.of(NewJob.of("a"), NewJob.of("b"), NewJob.of("c")));
    List<Job<String>> claimed = q.claim(3);

    q.fail(claimed.get(0), "boom");
    assertThat(q.release(claimed.get(0)).isLeft()).as("release after fail").isTrue();
    assertThat(q.fail(claimed.get(0), "another error").isLeft())
        .as("fail with another error after fail")
        .isTrue();
    q.release(claimed.get(1));
    assertThat(q.fail(claimed.get(1), "boom").isLeft()).as("fail after release").isTrue();
    q.complete(claimed.get(2));
    assertThat(q.fail(claimed.get(2), "boom").isLeft()).as("fail after complete").isTrue();
    assertThat(q.release(claimed.get(2)).isLeft()).as("release after complete").isTrue();
  }

  @Test
  void aHeartbeatRetriedAfterALostAnswerExtendsTheLeaseAgain() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("long")));
    Job<String> job = q.claim(1).get(0);
    InjectedFault lost =
        faults.onNextStatement(
            FaultKind.ANSWER_LOST,
            sqlContaining("update").and(sqlContaining("\"locked_until\" > clock_timestamp()")));

    assertThatThrownBy(() -> q.heartbeat(job)).isInstanceOf(BackendUnavailableException.class);
    lost.assertFired();
    Job<String> extended = q.heartbeat(job).get();

    assertThat(extended.lockedUntil()).isEqualTo(rows.get(id).lockedUntil());
    assertThat(extended.attempt()).isEqualTo(1);
  }

  @Test
  void aClaimWhoseAnswerWasLostLeavesItsJobToTheReaperWhichCountsTheLostAttempt() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("claimed by nobody")));
    InjectedFault lost =
        faults.onNextStatement(FaultKind.ANSWER_LOST, sqlContaining("set \"state\" = 'running'"));

    assertThatThrownBy(() -> q.claim(1)).isInstanceOf(BackendUnavailableException.class);
    lost.assertFired();
    assertThat(q.claim(1)).as("the job is running under the lost claim").isEmpty();
    rows.expireLease(id); // its lease runs out
    assertThat(q.reapExpired()).isEqualTo(new ReapResult(1, 0));

    assertThat(q.claim(1)).extracting(Job::attempt).containsExactly(2L);
    assertThat(rows.get(id).failures()).as("the lost claim's attempt, counted").isOne();
  }
}
