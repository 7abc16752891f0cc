package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.queue.AdminRefusal.CancelRefusal;
import dev.nolock.queue.AdminRefusal.RetryRefusal;
import dev.nolock.queue.QueueAdmin.Cancelled;
import dev.nolock.queue.QueueAdmin.DeadLetterPage;
import dev.nolock.queue.QueueAdmin.Revived;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The administration of a queue against the real PostgreSQL: every operation and refusal. */
@ExtendWith(PostgresExtension.class)
class QueueAdminIT {

  private static final AtomicInteger QUEUES = new AtomicInteger();

  private static PostgresSchema schema;
  private static JobRows rows;

  @BeforeAll
  static void createSchema(PostgresSchema s) {
    schema = s;
    JobQueue.create(s.dataSource(), QueueConfig.ofDefaults("setup"), PayloadCodec.utf8())
        .createTableIfMissing();
    rows = new JobRows(s.dsl(), QueueConfig.DEFAULT_TABLE);
  }

  private static JobQueue<String> queue() {
    return JobQueue.create(
        schema.dataSource(),
        QueueConfig.ofDefaults("admin-" + QUEUES.incrementAndGet()),
        PayloadCodec.utf8());
  }

  private static long id(EnqueueResult result) {
    assertThat(result).isInstanceOf(EnqueueResult.Enqueued.class);
    return ((EnqueueResult.Enqueued) result).id();
  }

  /** A dead letter of {@code q}: one attempt, failed. */
  private static long deadLetter(JobQueue<String> q, NewJob<String> job) {
    long id = id(q.enqueue(job.maxAttempts(1)));
    List<Job<String>> claimed = q.claim(1);
    assertThat(claimed).extracting(Job::id).containsExactly(id);
    assertThat(q.fail(claimed.get(0), "boom").get().isDeadLettered()).isTrue();
    return id;
  }

  // ---------------------------------------------------------------------------------------------
  // find

  @Test
  void findReturnsTheJobAsStoredInAnyStateAndNoneForAnUnknownId() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("hello").uniqueKey("k-1")));

    JobInfo<String> ready = q.admin().find(id).get();
    assertThat(ready.state()).isEqualTo(JobState.READY);
    assertThat(ready.queue()).isEqualTo(q.config().queue());
    assertThat(ready.payload().get()).isEqualTo("hello");
    assertThat(ready.uniqueKey()).isEqualTo(Option.some("k-1"));
    assertThat(ready.attempt()).isZero();
    assertThat(ready.lockedUntil()).isEqualTo(Option.none());

    Job<String> job = q.claim(1).get(0);
    JobInfo<String> running = q.admin().find(id).get();
    assertThat(running.state()).isEqualTo(JobState.RUNNING);
    assertThat(running.attempt()).isEqualTo(1);
    assertThat(running.lockedUntil()).isEqualTo(Option.some(job.lockedUntil()));

    q.fail(job, "it broke");
    JobInfo<String> failed = q.admin().find(id).get();
    assertThat(failed.lastError()).isEqualTo(Option.some("it broke"));
    assertThat(failed.failures()).isOne();

    assertThat(q.admin().find(Long.MAX_VALUE)).isEqualTo(Option.none());
    assertThat(queue().admin().find(id)).as("another queue's job").isEqualTo(Option.none());
  }

  // ---------------------------------------------------------------------------------------------
  // cancel

  @Test
  void aCancelledJobIsNeverClaimedAndFreesItsUniqueKey() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("x").uniqueKey("order-1")));

    Either<CancelRefusal, Cancelled> cancelled = q.admin().cancel(id);

    assertThat(cancelled.isRight()).as("%s", cancelled).isTrue();
    assertThat(cancelled.get().jobId()).isEqualTo(id);
    assertThat(cancelled.get().byThisCall()).isTrue();
    JobRows.Row row = rows.get(id);
    assertThat(row.state()).isEqualTo(JobState.CANCELLED);
    assertThat(row.finishedAt()).isEqualTo(cancelled.get().cancelledAt());
    assertThat(q.claim(10)).as("claims after the cancel").isEmpty();
    assertThat(q.enqueue(NewJob.of("again").uniqueKey("order-1")))
        .as("the key of a cancelled job is free")
        .isInstanceOf(EnqueueResult.Enqueued.class);
  }

  @Test
  void cancelRefusesARunningJobAndTheJobRunsOn() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("x")));
    Job<String> job = q.claim(1).get(0);

    assertThat(q.admin().cancel(id)).isEqualTo(Either.left(new AdminRefusal.Running(id, 1)));
    assertThat(rows.get(id).state()).isEqualTo(JobState.RUNNING);
    assertThat(q.complete(job).isRight()).as("the running attempt completes").isTrue();
  }

  @Test
  void cancelRefusesAFinishedJob() {
    JobQueue<String> q = queue();
    long done = id(q.enqueue(NewJob.of("x")));
    q.complete(q.claim(1).get(0));
    long dead = deadLetter(q, NewJob.of("y"));

    assertThat(q.admin().cancel(done))
        .isEqualTo(Either.left(new AdminRefusal.AlreadyFinished(done, JobState.DONE)));
    assertThat(q.admin().cancel(dead))
        .isEqualTo(Either.left(new AdminRefusal.AlreadyFinished(dead, JobState.DEAD)));
    assertThat(rows.get(done).state()).isEqualTo(JobState.DONE);
    assertThat(rows.get(dead).state()).isEqualTo(JobState.DEAD);
  }

  @Test
  void cancelRefusesAnUnknownJob() {
    JobQueue<String> q = queue();
    long elsewhere = id(queue().enqueue(NewJob.of("x")));

    assertThat(q.admin().cancel(Long.MAX_VALUE))
        .isEqualTo(Either.left(new AdminRefusal.UnknownJob(Long.MAX_VALUE)));
    assertThat(q.admin().cancel(elsewhere))
        .as("another queue's job")
        .isEqualTo(Either.left(new AdminRefusal.UnknownJob(elsewhere)));
    assertThat(rows.get(elsewhere).state()).isEqualTo(JobState.READY);
  }

  @Test
  void aSecondCancelAnswersCancelledNotByThisCall() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("x")));
    Cancelled first = q.admin().cancel(id).get();

    Either<CancelRefusal, Cancelled> second = q.admin().cancel(id);

    assertThat(second).isEqualTo(Either.right(new Cancelled(id, first.cancelledAt(), false)));
  }

  @Test
  void cancelAllAnswersPerJobInOrder() {
    JobQueue<String> q = queue();
    long running = id(q.enqueue(NewJob.of("r")));
    q.claim(1);
    long ready1 = id(q.enqueue(NewJob.of("a")));
    long ready2 = id(q.enqueue(NewJob.of("b")));

    List<Either<CancelRefusal, Cancelled>> answers =
        q.admin().cancelAll(List.of(ready1, running, Long.MAX_VALUE, ready2));

    assertThat(answers).hasSize(4);
    assertThat(answers.get(0).get().jobId()).isEqualTo(ready1);
    assertThat(answers.get(1)).isEqualTo(Either.left(new AdminRefusal.Running(running, 1)));
    assertThat(answers.get(2)).isEqualTo(Either.left(new AdminRefusal.UnknownJob(Long.MAX_VALUE)));
    assertThat(answers.get(3).get().jobId()).isEqualTo(ready2);
    assertThat(rows.count(q.config().queue(), JobState.CANCELLED)).isEqualTo(2);
  }

  @Test
  void retentionDeletesCancelledJobsOnceTheyAreOldEnough() {
    JobQueue<String> q = queue();
    long old = id(q.enqueue(NewJob.of("old")));
    long recent = id(q.enqueue(NewJob.of("recent")));
    q.admin().cancelAll(List.of(old, recent));
    schema
        .dsl()
        .execute(
            "UPDATE nolock_jobs SET finished_at = finished_at - interval '2 hours' WHERE id = ?",
            old);

    PurgeResult purged = q.purgeFinished(Duration.ofHours(1));

    assertThat(purged).isEqualTo(new PurgeResult(1, 1));
    assertThat(rows.find(old)).isEmpty();
    assertThat(rows.find(recent)).isPresent();
    assertThat(q.admin().cancel(old))
        .as("a cancel resent after retention purged the job")
        .isEqualTo(Either.left(new AdminRefusal.UnknownJob(old)));
  }

  @Test
  void aStaleAttemptOfACancelledJobIsToldItWasCancelled() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("x")));
    Job<String> stale = q.claim(1).get(0);
    q.release(stale);
    q.admin().cancel(id).get();

    StaleAttempt refused = q.complete(stale).getLeft();

    assertThat(refused.currentState()).isEqualTo(Option.some(JobState.CANCELLED));
    assertThat(refused.completedByThisAttempt()).isFalse();
    assertThat(refused.describe()).contains("cancelled by an administrator");
  }

  // ---------------------------------------------------------------------------------------------
  // reschedule

  @Test
  void rescheduleMovesAReadyJobAndNoClaimTakesItBeforeThen() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("x")));
    Instant later = rows.dbNow().plus(Duration.ofHours(1)).plusNanos(1_234);

    var moved = q.admin().reschedule(id, later);

    Instant stored = later.truncatedTo(ChronoUnit.MICROS);
    assertThat(moved).isEqualTo(Either.right(new QueueAdmin.Rescheduled(id, stored, true)));
    assertThat(rows.get(id).runAt()).isEqualTo(stored);
    assertThat(q.claim(10)).as("claims before the new time").isEmpty();

    Instant sooner = rows.dbNow().plus(Duration.ofMinutes(1));
    assertThat(q.admin().reschedule(id, sooner).get().runAt())
        .as("a ready job may be moved sooner too, while the time is ahead")
        .isEqualTo(sooner.truncatedTo(ChronoUnit.MICROS));
    assertThat(q.admin().reschedule(id, sooner))
        .as("the same reschedule again")
        .isEqualTo(
            Either.right(
                new QueueAdmin.Rescheduled(id, sooner.truncatedTo(ChronoUnit.MICROS), false)));
  }

  @Test
  void rescheduleRefusesATimeInThePastOnTheDatabaseClock() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("x").delay(Duration.ofHours(1))));
    Instant before = rows.get(id).runAt();
    Instant past = rows.dbNow().minusSeconds(1).truncatedTo(ChronoUnit.MICROS);

    var refused = q.admin().reschedule(id, past);

    assertThat(refused.isLeft()).isTrue();
    assertThat(refused.getLeft()).isInstanceOf(AdminRefusal.InThePast.class);
    AdminRefusal.InThePast inThePast = (AdminRefusal.InThePast) refused.getLeft();
    assertThat(inThePast.requested()).isEqualTo(past);
    assertThat(inThePast.databaseNow()).isAfter(past);
    assertThat(rows.get(id).runAt()).as("unchanged").isEqualTo(before);
  }

  @Test
  void rescheduleRefusesAJobThatIsNotReadyAndAnUnknownOne() {
    JobQueue<String> q = queue();
    long running = id(q.enqueue(NewJob.of("x")));
    q.claim(1);
    long done = id(q.enqueue(NewJob.of("y")));
    q.complete(q.claim(1).get(0));
    long cancelled = id(q.enqueue(NewJob.of("z")));
    q.admin().cancel(cancelled);
    Instant later = rows.dbNow().plus(Duration.ofHours(1));

    assertThat(q.admin().reschedule(running, later))
        .isEqualTo(Either.left(new AdminRefusal.NotReady(running, JobState.RUNNING)));
    assertThat(q.admin().reschedule(done, later))
        .isEqualTo(Either.left(new AdminRefusal.NotReady(done, JobState.DONE)));
    assertThat(q.admin().reschedule(cancelled, later))
        .isEqualTo(Either.left(new AdminRefusal.NotReady(cancelled, JobState.CANCELLED)));
    assertThat(q.admin().reschedule(Long.MAX_VALUE, later))
        .isEqualTo(Either.left(new AdminRefusal.UnknownJob(Long.MAX_VALUE)));
  }

  // ---------------------------------------------------------------------------------------------
  // dead letters

  @Test
  void deadLetterPagesAreStableWhileJobsDieAndAreRetriedMeanwhile() {
    JobQueue<String> q = queue();
    List<Long> dead = new ArrayList<>();
    for (int i = 0; i < 5; i++) {
      dead.add(deadLetter(q, NewJob.of("d" + i)));
    }
    q.enqueue(NewJob.of("alive").delay(Duration.ofHours(1)));

    DeadLetterPage<String> first = q.admin().deadLetters(2);
    assertThat(first.letters()).extracting(JobInfo::id).containsExactly(dead.get(0), dead.get(1));
    assertThat(first.letters()).allMatch(l -> l.state() == JobState.DEAD);
    assertThat(first.letters().get(0).lastError()).isEqualTo(Option.some("boom"));
    assertThat(first.nextAfter()).isEqualTo(Option.some(dead.get(1)));

    // Meanwhile: a new job dies, and a letter of the first page is retried.
    long diedLater = deadLetter(q, NewJob.of("later"));
    q.admin().retry(first.letters().get(0)).get();

    List<Long> seen = new ArrayList<>(List.of(dead.get(0), dead.get(1)));
    Option<Long> after = first.nextAfter();
    while (after.isDefined()) {
      DeadLetterPage<String> page = q.admin().deadLetters(after.get(), 2);
      page.letters().forEach(l -> seen.add(l.id()));
      after = page.nextAfter();
    }
    assertThat(seen)
        .as("every letter once, in id order, the one that died meanwhile at the end")
        .containsExactly(
            dead.get(0), dead.get(1), dead.get(2), dead.get(3), dead.get(4), diedLater);
    assertThat(q.admin().deadLetters(diedLater, 2).letters()).isEmpty();
  }

  @Test
  void aDeadLetterPageAsksForOneToAThousand() {
    QueueAdmin<String> admin = queue().admin();
    assertThatThrownBy(() -> admin.deadLetters(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("1 to 1000");
    assertThatThrownBy(() -> admin.deadLetters(5, QueueAdmin.MAX_PAGE + 1))
        .isInstanceOf(IllegalArgumentException.class);
  }

  // ---------------------------------------------------------------------------------------------
  // retry

  @Test
  void retryRevivesADeadLetterWithFreshAttemptsAndASecondRetryAnswersRevivedNotByThisCall() {
    JobQueue<String> q = queue();
    long id = deadLetter(q, NewJob.of("x"));
    JobInfo<String> letter = q.admin().find(id).get();

    assertThat(q.admin().retry(letter)).isEqualTo(Either.right(new Revived(id, 1, true)));
    JobRows.Row revived = rows.get(id);
    assertThat(revived.state()).isEqualTo(JobState.READY);
    assertThat(revived.failures()).isZero();
    assertThat(revived.attempt()).as("the token is kept").isEqualTo(1);

    assertThat(q.admin().retry(letter)).isEqualTo(Either.right(new Revived(id, 1, false)));
    Job<String> again = q.claim(1).get(0);
    assertThat(again.attempt()).isEqualTo(2);
    assertThat(q.admin().retry(letter))
        .as("once the revived job was claimed")
        .isEqualTo(Either.right(new Revived(id, 1, false)));
    assertThat(rows.get(id).attempt()).isEqualTo(2);
  }

  @Test
  void retryRefusesWhileALiveJobHoldsTheUniqueKey() {
    JobQueue<String> q = queue();
    long dead = deadLetter(q, NewJob.of("x").uniqueKey("invoice-7"));
    JobInfo<String> letter = q.admin().find(dead).get();
    long live = id(q.enqueue(NewJob.of("y").uniqueKey("invoice-7")));

    Either<RetryRefusal, Revived> refused = q.admin().retry(letter);

    assertThat(refused)
        .isEqualTo(
            Either.left(new AdminRefusal.UniqueKeyInUse(dead, "invoice-7", Option.some(live))));
    assertThat(rows.get(dead).state()).isEqualTo(JobState.DEAD);

    q.complete(q.claim(1).get(0));
    assertThat(q.admin().retry(letter))
        .as("once the live job finished")
        .isEqualTo(Either.right(new Revived(dead, 1, true)));
  }

  @Test
  void retryRefusesAnUnknownJobAndTakesOnlyDeadLettersOfItsQueue() {
    JobQueue<String> q = queue();
    long id = deadLetter(q, NewJob.of("x"));
    JobInfo<String> letter = q.admin().find(id).get();
    schema.dsl().execute("DELETE FROM nolock_jobs WHERE id = ?", id);

    assertThat(q.admin().retry(letter)).isEqualTo(Either.left(new AdminRefusal.UnknownJob(id)));

    long ready = id(q.enqueue(NewJob.of("y")));
    JobInfo<String> notDead = q.admin().find(ready).get();
    assertThatThrownBy(() -> q.admin().retry(notDead))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("is ready");
    assertThatThrownBy(() -> queue().admin().retry(letter))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("dead letter of queue");
  }

  @Test
  void retryAllAndRetryAllDeadLettersAnswerPerJob() {
    JobQueue<String> q = queue();
    long a = deadLetter(q, NewJob.of("a"));
    long keyed = deadLetter(q, NewJob.of("k").uniqueKey("taken"));
    long b = deadLetter(q, NewJob.of("b"));
    long holder = id(q.enqueue(NewJob.of("holder").uniqueKey("taken").delay(Duration.ofHours(1))));
    List<JobInfo<String>> letters = q.admin().deadLetters(10).letters();

    List<Either<RetryRefusal, Revived>> answers = q.admin().retryAll(letters.subList(0, 2));

    assertThat(answers)
        .containsExactly(
            Either.right(new Revived(a, 1, true)),
            Either.left(new AdminRefusal.UniqueKeyInUse(keyed, "taken", Option.some(holder))));

    List<Either<RetryRefusal, Revived>> all = q.admin().retryAllDeadLetters();
    assertThat(all)
        .as("what is dead now: the keyed letter (still refused) and b")
        .containsExactly(
            Either.left(new AdminRefusal.UniqueKeyInUse(keyed, "taken", Option.some(holder))),
            Either.right(new Revived(b, 1, true)));
    assertThat(rows.count(q.config().queue(), JobState.DEAD)).isOne();
    assertThat(rows.count(q.config().queue(), JobState.READY)).isEqualTo(3);
  }
}
