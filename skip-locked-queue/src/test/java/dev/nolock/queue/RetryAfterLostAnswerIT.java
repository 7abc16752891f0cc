package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A finish whose answer was lost, retried by the caller: the retry is answered with the true
 * outcome, and the effect exists once.
 */
@ExtendWith(PostgresExtension.class)
class RetryAfterLostAnswerIT {

  private static final AtomicInteger QUEUES = new AtomicInteger();

  private static PostgresSchema schema;
  private static JobRows rows;

  @BeforeAll
  static void createSchema(PostgresSchema s) {
    schema = s;
    JobQueue.create(s.dataSource(), QueueConfig.ofDefaults("setup"), PayloadCodec.utf8())
        .createSchemaIfMissing();
    rows = new JobRows(s.dsl(), QueueConfig.DEFAULT_TABLE);
    // The business ledger has no unique key on the job: a second commit of the same effect stays
    // visible as a second row instead of being refused by a constraint.
    s.dsl().execute("CREATE TABLE payments (job_id bigint, attempt bigint)");
  }

  private static JobQueue<String> queue() {
    return JobQueue.create(
        schema.dataSource(),
        QueueConfig.ofDefaults("r" + QUEUES.incrementAndGet()),
        PayloadCodec.utf8());
  }

  private static long id(EnqueueResult result) {
    return ((EnqueueResult.Enqueued) result).id();
  }

  private static int payments(long jobId) {
    return schema.dsl().fetchCount(schema.dsl().selectFrom("payments").where("job_id = ?", jobId));
  }

  /** The README's recipe: the effect and the completion commit together, or roll back together. */
  private static Either<StaleAttempt, Finished> payAndComplete(
      DSLContext app, JobQueue<String> q, Job<String> job) {
    try {
      Finished done =
          app.transactionResult(
              cfg -> {
                DSLContext tx = cfg.dsl();
                tx.execute("INSERT INTO payments VALUES (?, ?)", job.id(), job.attempt());
                return q.complete(tx, job).getOrElseThrow(RolledBack::new);
              });
      return Either.right(done);
    } catch (RolledBack e) {
      return Either.left(e.refusal);
    }
  }

  private static final class RolledBack extends RuntimeException {
    private static final long serialVersionUID = 1L;
    final transient StaleAttempt refusal;

    RolledBack(StaleAttempt refusal) {
      super(refusal.describe(), null, false, false);
      this.refusal = refusal;
    }
  }

  @Test
  void aCallersTransactionRetriedAfterItsCommitAnswerWasLostCommitsItsEffectOnce() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("charge 10")));
    Job<String> job = q.claim(1).get(0);

    // The first try commits on the server; its COMMIT answer is lost, so the caller cannot tell
    // and runs the whole transaction again.
    Either<StaleAttempt, Finished> first = payAndComplete(schema.dsl(), q, job);
    Either<StaleAttempt, Finished> retry = payAndComplete(schema.dsl(), q, job);

    assertThat(first.isRight()).isTrue();
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

    Either<StaleAttempt, Integer> first =
        q.completeWith(job, tx -> pay(tx, job, writesRun)); // its COMMIT answer is lost
    Either<StaleAttempt, Integer> retry = q.completeWith(job, tx -> pay(tx, job, writesRun));

    assertThat(first.isRight()).isTrue();
    assertThat(payments(id)).as("payments for the job after completeWith was retried").isOne();
    assertThat(writesRun.get()).as("times the writes ran").isOne();
    assertThat(retry.getLeft().completedByThisAttempt()).isTrue();
  }

  private static int pay(DSLContext tx, Job<String> job, AtomicInteger writesRun) {
    writesRun.incrementAndGet();
    return tx.execute("INSERT INTO payments VALUES (?, ?)", job.id(), job.attempt());
  }

  @Test
  void completeInItsOwnTransactionRetriedAfterALostAnswerIsAnsweredAsTheFirstCallWas() {
    JobQueue<String> q = queue();
    q.enqueue(NewJob.of("done"));
    Job<String> job = q.claim(1).get(0);

    Either<StaleAttempt, Finished> first = q.complete(job); // its answer is lost
    Either<StaleAttempt, Finished> retry = q.complete(job);
    List<Either<StaleAttempt, Finished>> batchRetry = q.completeAll(List.of(job));

    assertThat(first.isRight()).isTrue();
    assertThat(retry).isEqualTo(first);
    assertThat(batchRetry).containsExactly(first);
  }

  @Test
  void failRetriedAfterALostAnswerIsAnsweredAsTheFirstCallWasAndCountsOneFailure() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("flaky")));
    Job<String> job = q.claim(1).get(0);

    Either<StaleAttempt, Finished> first = q.fail(job, "boom"); // its answer is lost
    Either<StaleAttempt, Finished> retry = q.fail(job, "boom");

    assertThat(first.isRight()).isTrue();
    assertThat(retry).as("the retried fail of this attempt").isEqualTo(first);
    assertThat(rows.get(id).failures()).isOne();
  }

  @Test
  void aFailRetriedAfterALostAnswerThatDeadLetteredTheJobIsAnsweredAsTheFirstCallWas() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("poison").maxAttempts(1)));
    Job<String> job = q.claim(1).get(0);

    Either<StaleAttempt, Finished> first = q.fail(job, null); // its answer is lost
    Either<StaleAttempt, Finished> retry = q.fail(job, null);

    assertThat(first.get().isDeadLettered()).isTrue();
    assertThat(retry).isEqualTo(first);
    assertThat(q.retryDead(id)).isEqualTo(RetryDeadOutcome.REQUEUED);
    assertThat(q.fail(job, null).isLeft())
        .as("a fail retried after the job was revived: the row no longer shows it")
        .isTrue();
  }

  @Test
  void releaseRetriedAfterALostAnswerIsAnsweredAsTheFirstCallWas() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("later")));
    Job<String> job = q.claim(1).get(0);

    Either<StaleAttempt, Finished> first = q.release(job); // its answer is lost
    Either<StaleAttempt, Finished> retry = q.release(job);

    assertThat(first.isRight()).isTrue();
    assertThat(retry).as("the retried release of this attempt").isEqualTo(first);
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
}
