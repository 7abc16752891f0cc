package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.sql.SqlErrors;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import java.io.IOException;
import java.sql.Connection;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The queue's API against the real PostgreSQL: enqueue, claim, finish, reaper, retention. */
@ExtendWith(PostgresExtension.class)
class JobQueueIT {

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

  private static String newQueueName() {
    return "q" + QUEUES.incrementAndGet();
  }

  private static JobQueue<String> queue(QueueConfig.Builder config) {
    return JobQueue.create(schema.dataSource(), config.build(), PayloadCodec.utf8());
  }

  private static JobQueue<String> queue() {
    return queue(QueueConfig.custom(newQueueName()));
  }

  private static long id(EnqueueResult result) {
    assertThat(result).isInstanceOf(EnqueueResult.Enqueued.class);
    return ((EnqueueResult.Enqueued) result).id();
  }

  private static double counter(MeterRegistry registry, String name, String... tags) {
    return registry.get(name).tags(tags).counter().count();
  }

  // ---------------------------------------------------------------------------------------------
  // Enqueue

  @Test
  void anEnqueuedJobIsClaimedWithAttemptOneAndALeaseOnTheDatabaseClock() {
    JobQueue<String> q = queue(QueueConfig.custom(newQueueName()).lease(Duration.ofSeconds(7)));
    long id = id(q.enqueue(NewJob.of("hello")));

    Instant before = rows.dbNow();
    List<Job<String>> claimed = q.claim(10);
    Instant after = rows.dbNow();

    assertThat(claimed).hasSize(1);
    Job<String> job = claimed.get(0);
    assertThat(job.id()).isEqualTo(id);
    assertThat(job.payload()).isEqualTo("hello");
    assertThat(job.attempt()).isEqualTo(1);
    assertThat(job.token().value()).isEqualTo(1);
    assertThat(job.lockedUntil()).isBetween(before.plusSeconds(7), after.plusSeconds(7));
    assertThat(job.deadline().remaining()).isPositive().isLessThanOrEqualTo(Duration.ofSeconds(7));
    assertThat(rows.get(id).state()).isEqualTo(JobState.RUNNING);
    assertThat(q.claim(10)).as("a running job is not claimed again").isEmpty();
  }

  @Test
  void aJobEnqueuedInACallersTransactionExistsOnlyIfThatTransactionCommits() {
    JobQueue<String> q = queue();
    DSLContext app = schema.dsl();

    assertThatThrownBy(
            () ->
                app.transaction(
                    cfg -> {
                      q.enqueue(cfg.dsl(), NewJob.of("rolled back"));
                      throw new IllegalStateException("the business write failed");
                    }))
        .hasMessageContaining("the business write failed");
    assertThat(q.claim(10)).isEmpty();

    app.transaction(cfg -> q.enqueue(cfg.dsl(), NewJob.of("committed")));
    assertThat(q.claim(10)).extracting(Job::payload).containsExactly("committed");
  }

  @Test
  void anEnqueueOnAContextInNoTransactionIsRefusedBeforeAnythingIsSent() {
    JobQueue<String> q = queue();
    DSLContext autocommit = schema.dsl(); // the test pool hands out autocommit connections

    assertThatThrownBy(() -> q.enqueue(autocommit, NewJob.of("would commit on its own")))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("in no transaction");
    assertThat(rows.count(q.config().queue(), JobState.READY)).as("jobs enqueued").isZero();
  }

  @Test
  void aBatchEnqueueReportsEachJobInInputOrderAndFlagsDuplicatesWithinTheBatch() {
    JobQueue<String> q = queue();
    List<EnqueueResult> results =
        q.enqueueAll(
            List.of(
                NewJob.of("a").uniqueKey("k1"),
                NewJob.of("b"),
                NewJob.of("c").uniqueKey("k1"),
                NewJob.of("d").uniqueKey("k2"),
                NewJob.of("e")));

    assertThat(results.get(2)).isEqualTo(new EnqueueResult.Duplicate("k1"));
    List<Long> ids = new ArrayList<>();
    for (int i : new int[] {0, 1, 3, 4}) {
      ids.add(id(results.get(i)));
    }
    assertThat(ids).isSorted().doesNotHaveDuplicates();
    assertThat(rows.get(ids.get(0)).uniqueKey()).isEqualTo("k1");
    assertThat(rows.get(ids.get(2)).uniqueKey()).isEqualTo("k2");
    assertThat(q.claim(100)).extracting(Job::payload).containsExactly("a", "b", "d", "e");
  }

  @Test
  void aBatchLargerThanOneInsertStatementKeepsInputOrder() {
    JobQueue<String> q = queue();
    List<NewJob<String>> jobs = new ArrayList<>();
    for (int i = 0; i < JobQueue.INSERT_CHUNK * 2 + 5; i++) {
      // Every 100th job repeats an earlier key, across the statement boundary too.
      jobs.add(NewJob.of("job-" + i).uniqueKey("key-" + (i % 100 == 99 ? i - 1 : i)));
    }
    List<EnqueueResult> results = q.enqueueAll(jobs);

    assertThat(results).hasSize(jobs.size());
    for (int i = 0; i < jobs.size(); i++) {
      assertThat(results.get(i).isDuplicate()).as("job %d", i).isEqualTo(i % 100 == 99);
    }
  }

  @Test
  void aUniqueKeyIsTakenWhileTheJobIsPendingAndFreeAgainOnceItIsDoneOrDead() {
    JobQueue<String> q = queue();
    long first = id(q.enqueue(NewJob.of("1").uniqueKey("invoice-42")));
    assertThat(q.enqueue(NewJob.of("2").uniqueKey("invoice-42")))
        .as("duplicate while ready")
        .isEqualTo(new EnqueueResult.Duplicate("invoice-42"));

    Job<String> running = q.claim(1).get(0);
    assertThat(q.enqueue(NewJob.of("3").uniqueKey("invoice-42")).isDuplicate())
        .as("duplicate while running")
        .isTrue();

    assertThat(q.complete(running).isRight()).isTrue();
    long second = id(q.enqueue(NewJob.of("4").uniqueKey("invoice-42")));
    assertThat(second).as("a new job once the first is done").isNotEqualTo(first);

    Job<String> dying = q.claim(1).get(0);
    assertThat(dying.id()).isEqualTo(second);
    long third = id(q.enqueue(NewJob.of("5").uniqueKey("invoice-43").maxAttempts(1)));
    Job<String> dead = q.claim(1).get(0);
    assertThat(dead.id()).isEqualTo(third);
    assertThat(q.fail(dead, "boom").get().state()).isEqualTo(JobState.DEAD);
    assertThat(q.enqueue(NewJob.of("6").uniqueKey("invoice-43")).isDuplicate())
        .as("a dead job's key is free")
        .isFalse();
  }

  @Test
  void aDelayedJobIsStoredAtTheDatabaseClockPlusTheDelayAndNotClaimedBefore() {
    JobQueue<String> q = queue();
    Instant before = rows.dbNow();
    long delayed = id(q.enqueue(NewJob.of("later").delay(Duration.ofHours(1))));
    Instant after = rows.dbNow();
    Instant fixed = before.plus(Duration.ofDays(2));
    long scheduled = id(q.enqueue(NewJob.of("fixed").runAt(fixed)));
    long past = id(q.enqueue(NewJob.of("past").runAt(before.minusSeconds(5))));

    assertThat(rows.get(delayed).runAt())
        .isBetween(before.plus(Duration.ofHours(1)), after.plus(Duration.ofHours(1)));
    assertThat(rows.get(scheduled).runAt()).isEqualTo(fixed);
    assertThat(q.claim(10)).extracting(Job::id).containsExactly(past);
    assertThat(rows.get(delayed).state()).isEqualTo(JobState.READY);
    assertThat(rows.get(scheduled).state()).isEqualTo(JobState.READY);
  }

  // ---------------------------------------------------------------------------------------------
  // Claim

  @Test
  void concurrentClaimsNeverReturnMoreThanAskedNorTheSameJobTwice() throws Exception {
    JobQueue<String> q = queue();
    List<NewJob<String>> jobs = new ArrayList<>();
    for (int i = 0; i < 300; i++) {
      jobs.add(NewJob.of("job-" + i));
    }
    q.enqueueAll(jobs);

    ExecutorService threads = Executors.newFixedThreadPool(6);
    try {
      List<Future<List<Long>>> results = new ArrayList<>();
      for (int t = 0; t < 6; t++) {
        results.add(
            threads.submit(
                () -> {
                  List<Long> mine = new ArrayList<>();
                  for (List<Job<String>> batch = q.claim(7); !batch.isEmpty(); batch = q.claim(7)) {
                    assertThat(batch.size()).isLessThanOrEqualTo(7);
                    batch.forEach(job -> mine.add(job.id()));
                  }
                  return mine;
                }));
      }
      List<Long> all = new ArrayList<>();
      for (Future<List<Long>> r : results) {
        all.addAll(r.get(60, TimeUnit.SECONDS));
      }
      assertThat(all).hasSize(300).doesNotHaveDuplicates();
    } finally {
      threads.shutdownNow();
    }
  }

  @Test
  void claimsTakeTheOldestDueJobsFirst() {
    JobQueue<String> q = queue();
    Instant now = rows.dbNow();
    q.enqueue(NewJob.of("newer").runAt(now.minusSeconds(10)));
    q.enqueue(NewJob.of("oldest").runAt(now.minusSeconds(30)));
    q.enqueue(NewJob.of("older").runAt(now.minusSeconds(20)));

    assertThat(q.claim(2)).extracting(Job::payload).containsExactly("oldest", "older");
  }

  // ---------------------------------------------------------------------------------------------
  // Failure handling

  @Test
  void aFailedAttemptIsRequeuedAtTheDatabaseClockPlusABackoffWithinTheJitterCeiling() {
    JobQueue<String> q =
        queue(
            QueueConfig.custom(newQueueName())
                .backoff(Duration.ofSeconds(10), Duration.ofMinutes(1)));
    long id = id(q.enqueue(NewJob.of("flaky")));

    Job<String> first = q.claim(1).get(0);
    Instant before = rows.dbNow();
    Finished failed = q.fail(first, "first failure").get();
    Instant after = rows.dbNow();
    assertThat(failed.state()).isEqualTo(JobState.READY);
    assertThat(failed.runAt())
        .as("first failure: uniform in [now, now + base]")
        .isBetween(before, after.plusSeconds(10));
    JobRows.Row row = rows.get(id);
    assertThat(row.runAt()).isEqualTo(failed.runAt());
    assertThat(row.failures()).isEqualTo(1);
    assertThat(row.lastError()).isEqualTo("first failure");
    assertThat(row.lockedUntil()).isNull();

    rows.makeDue(id);
    Job<String> second = q.claim(1).get(0);
    assertThat(second.attempt()).as("a strictly higher attempt token").isEqualTo(2);
    assertThat(second.failures()).isEqualTo(1);
    before = rows.dbNow();
    Finished failedAgain = q.fail(second, "second failure").get();
    after = rows.dbNow();
    assertThat(failedAgain.runAt())
        .as("second failure: uniform in [now, now + 2 * base]")
        .isBetween(before, after.plusSeconds(20));
  }

  @Test
  void theLastAllowedFailureDeadLettersTheJobKeepingItsLastError() {
    MeterRegistry registry = new SimpleMeterRegistry();
    String name = newQueueName();
    JobQueue<String> q = queue(QueueConfig.custom(name).maxAttempts(3).metrics(registry, "it"));
    long id = id(q.enqueue(NewJob.of("poison")));

    List<Finished> outcomes = new ArrayList<>();
    for (int attempt = 1; attempt <= 3; attempt++) {
      rows.makeDue(id);
      Job<String> job = q.claim(1).get(0);
      assertThat(job.attempt()).isEqualTo(attempt);
      assertThat(job.isLastAttempt()).isEqualTo(attempt == 3);
      outcomes.add(q.fail(job, "boom " + attempt).get());
    }

    assertThat(outcomes)
        .extracting(Finished::state)
        .containsExactly(JobState.READY, JobState.READY, JobState.DEAD);
    JobRows.Row row = rows.get(id);
    assertThat(row.state()).isEqualTo(JobState.DEAD);
    assertThat(row.lastError()).isEqualTo("boom 3");
    assertThat(row.finishedAt()).isNotNull();
    assertThat(q.claim(1)).isEmpty();
    assertThat(counter(registry, "nolock.queue.failures")).isEqualTo(3);
    assertThat(counter(registry, "nolock.queue.dead.letters")).isEqualTo(1);
  }

  @Test
  void retryOfADeadLetterRequeuesItWithFreshAttemptsAndAHigherToken() {
    JobQueue<String> q = queue(QueueConfig.custom(newQueueName()).maxAttempts(2));
    long id = id(q.enqueue(NewJob.of("poison")));
    for (int i = 0; i < 2; i++) {
      rows.makeDue(id);
      q.fail(q.claim(1).get(0), "boom " + i);
    }
    assertThat(rows.get(id).state()).isEqualTo(JobState.DEAD);

    JobInfo<String> letter = q.admin().find(id).get();
    assertThat(q.admin().retry(letter))
        .isEqualTo(Either.right(new QueueAdmin.Revived(id, 2, true)));
    Job<String> revived = q.claim(1).get(0);
    assertThat(revived.id()).isEqualTo(id);
    assertThat(revived.attempt()).as("the token keeps increasing").isEqualTo(3);
    assertThat(revived.failures()).as("a fresh set of attempts").isZero();
    JobInfo<String> running = q.admin().find(id).get();
    assertThatThrownBy(() -> q.admin().retry(running))
        .as("it is running, not dead")
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("is running");
    assertThat(q.admin().retry(letter))
        .as("the letter, sent again while its revival runs: revived, by an earlier call")
        .isEqualTo(Either.right(new QueueAdmin.Revived(id, 2, false)));
    JobInfo<String> unknown =
        new JobInfo<>(
            Long.MAX_VALUE,
            letter.queue(),
            JobState.DEAD,
            1,
            1,
            1,
            letter.runAt(),
            letter.enqueuedAt(),
            io.vavr.control.Option.none(),
            letter.finishedAt(),
            io.vavr.control.Option.none(),
            letter.lastError(),
            letter.payload());
    assertThat(q.admin().retry(unknown))
        .isEqualTo(Either.left(new AdminRefusal.UnknownJob(Long.MAX_VALUE)));
    assertThat(q.complete(revived).isRight()).isTrue();
  }

  @Test
  void retryOfADeadLetterRefusesWhileAnotherJobHoldsItsUniqueKey() {
    JobQueue<String> q = queue();
    long dead = id(q.enqueue(NewJob.of("x").uniqueKey("k").maxAttempts(1)));
    q.fail(q.claim(1).get(0), "boom");
    long replacement = id(q.enqueue(NewJob.of("y").uniqueKey("k")));

    assertThat(q.admin().retry(q.admin().find(dead).get()))
        .isEqualTo(
            Either.left(
                new AdminRefusal.UniqueKeyInUse(
                    dead, "k", io.vavr.control.Option.some(replacement))));
    assertThat(rows.get(dead).state()).isEqualTo(JobState.DEAD);
    assertThat(rows.get(replacement).state()).isEqualTo(JobState.READY);
  }

  // ---------------------------------------------------------------------------------------------
  // Stale attempts

  @Test
  void aStaleAttemptCannotCompleteFailHeartbeatOrReleaseAndEachRefusalIsCounted() {
    MeterRegistry registry = new SimpleMeterRegistry();
    JobQueue<String> q = queue(QueueConfig.custom(newQueueName()).metrics(registry, "it"));
    long id = id(q.enqueue(NewJob.of("contested")));
    Job<String> stale = q.claim(1).get(0);

    rows.expireLease(id); // the worker paused past its lease
    Either<StaleAttempt, Job<String>> heartbeat = q.heartbeat(stale);
    assertThat(heartbeat.isLeft()).as("an expired lease is not extended").isTrue();
    assertThat(q.reapExpired()).isEqualTo(new ReapResult(1, 0));
    Job<String> current = q.claim(1).get(0);
    assertThat(current.attempt()).isEqualTo(2);

    Either<StaleAttempt, Finished> complete = q.complete(stale);
    Either<StaleAttempt, Finished> fail = q.fail(stale, "late");
    Either<StaleAttempt, Finished> release = q.release(stale);
    Either<StaleAttempt, Job<String>> lateHeartbeat = q.heartbeat(stale);

    StaleAttempt expected =
        new StaleAttempt(
            id, 1, io.vavr.control.Option.of(JobState.RUNNING), io.vavr.control.Option.of(2L));
    assertThat(complete).isEqualTo(Either.left(expected));
    assertThat(fail).isEqualTo(Either.left(expected));
    assertThat(release).isEqualTo(Either.left(expected));
    assertThat(lateHeartbeat).isEqualTo(Either.left(expected));
    assertThat(complete.getLeft().describe()).contains("re-claimed");
    for (String op : List.of("complete", "fail", "release")) {
      assertThat(counter(registry, "nolock.queue.stale.finishes", "operation", op))
          .as(op)
          .isEqualTo(1);
    }
    assertThat(counter(registry, "nolock.queue.stale.finishes", "operation", "heartbeat"))
        .isEqualTo(2);
    assertThat(counter(registry, "nolock.fence.rejections")).isEqualTo(5);

    JobRows.Row row = rows.get(id);
    assertThat(row.state()).isEqualTo(JobState.RUNNING);
    assertThat(row.attempt()).isEqualTo(2);
    assertThat(row.failures()).as("only the reaper's count, none from the stale fail").isOne();
    assertThat(row.lastError()).contains("the lease of attempt 1 expired");
    assertThat(q.complete(current).get().state()).isEqualTo(JobState.DONE);
    assertThat(counter(registry, "nolock.queue.completions")).isEqualTo(1);
  }

  @Test
  void completingTheSameAttemptTwiceAnswersTheSameAndCountsOnce() {
    MeterRegistry registry = new SimpleMeterRegistry();
    JobQueue<String> q = queue(QueueConfig.custom(newQueueName()).metrics(registry, "it"));
    q.enqueue(NewJob.of("once"));
    Job<String> job = q.claim(1).get(0);

    Finished first = q.complete(job).get();
    Finished again = q.complete(job).get();

    assertThat(again).isEqualTo(first);
    assertThat(counter(registry, "nolock.queue.completions")).isEqualTo(1);
    assertThat(counter(registry, "nolock.fence.rejections")).isZero();
  }

  @Test
  void completeAllCompletesTheCurrentAttemptsAndRefusesOnlyTheStaleOneInTheBatch() {
    MeterRegistry registry = new SimpleMeterRegistry();
    JobQueue<String> q = queue(QueueConfig.custom(newQueueName()).metrics(registry, "it"));
    long a = id(q.enqueue(NewJob.of("a")));
    long b = id(q.enqueue(NewJob.of("b")));
    long c = id(q.enqueue(NewJob.of("c")));
    List<Job<String>> claimed = q.claim(3);
    Job<String> jobA = claimed.get(0);
    Job<String> staleB = claimed.get(1);
    Job<String> jobC = claimed.get(2);
    assertThat(List.of(jobA.id(), staleB.id(), jobC.id())).containsExactly(a, b, c);
    Finished aBefore = q.complete(jobA).get(); // completed before: the batch answers the same
    rows.expireLease(b); // b's worker paused past its lease; b is re-claimed
    assertThat(q.reapExpired()).isEqualTo(new ReapResult(1, 0));
    Job<String> currentB = q.claim(1).get(0);
    assertThat(currentB.attempt()).isEqualTo(2);

    List<Either<StaleAttempt, Finished>> answers = q.completeAll(List.of(jobA, staleB, jobC));

    assertThat(answers.get(0)).isEqualTo(Either.right(aBefore));
    assertThat(answers.get(1).getLeft().currentAttempt()).contains(2L);
    assertThat(answers.get(2).get().state()).isEqualTo(JobState.DONE);
    assertThat(rows.get(a).state()).isEqualTo(JobState.DONE);
    assertThat(rows.get(b).state())
        .as("the re-claimed attempt's row is untouched")
        .isEqualTo(JobState.RUNNING);
    assertThat(rows.get(b).attempt()).isEqualTo(2);
    assertThat(rows.get(c).state()).isEqualTo(JobState.DONE);
    assertThat(counter(registry, "nolock.queue.completions")).isEqualTo(2);
    assertThat(counter(registry, "nolock.queue.stale.finishes", "operation", "complete"))
        .isEqualTo(1);
    assertThat(q.completeAll(List.of(currentB)).get(0).get().attempt()).isEqualTo(2);
    assertThat(rows.get(b).state()).isEqualTo(JobState.DONE);
  }

  @Test
  void completeAllAnswersTheSameAttemptTwiceInOneBatchAlikeAndAnEmptyBatchWithNothing() {
    MeterRegistry registry = new SimpleMeterRegistry();
    JobQueue<String> q = queue(QueueConfig.custom(newQueueName()).metrics(registry, "it"));
    q.enqueue(NewJob.of("twice"));
    Job<String> job = q.claim(1).get(0);

    List<Either<StaleAttempt, Finished>> answers = q.completeAll(List.of(job, job));

    assertThat(answers.get(0).get().state()).isEqualTo(JobState.DONE);
    assertThat(answers.get(1)).isEqualTo(answers.get(0));
    assertThat(counter(registry, "nolock.queue.completions")).isEqualTo(1);
    assertThat(q.completeAll(List.of())).isEmpty();
  }

  @Test
  void heartbeatAllAnswersEachAttemptOfAJobApart() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("twice held")));
    Job<String> stale = q.claim(1).get(0);
    rows.expireLease(id); // the process paused past the lease; its own reaper and claim follow
    assertThat(q.reapExpired()).isEqualTo(new ReapResult(1, 0));
    Job<String> current = q.claim(1).get(0);

    List<io.vavr.control.Option<Job<String>>> extended = q.heartbeatAll(List.of(current, stale));

    assertThat(extended.get(0).map(Job::attempt)).as("attempt 2, extended").contains(2L);
    assertThat(extended.get(1)).as("attempt 1, whose lease expired").isEmpty();
    assertThat(extended.get(0).get().lockedUntil()).isEqualTo(rows.get(id).lockedUntil());
    assertThat(rows.get(id).attempt()).isEqualTo(2);
  }

  @Test
  void completeAllAnswersTwoAttemptsOfOneJobApartAndCompletesTheRestOfTheBatch() {
    MeterRegistry registry = new SimpleMeterRegistry();
    JobQueue<String> q = queue(QueueConfig.custom(newQueueName()).metrics(registry, "it"));
    long id = id(q.enqueue(NewJob.of("twice held")));
    Job<String> stale = q.claim(1).get(0);
    rows.expireLease(id);
    assertThat(q.reapExpired()).isEqualTo(new ReapResult(1, 0));
    Job<String> current = q.claim(1).get(0);
    long other = id(q.enqueue(NewJob.of("other")));
    Job<String> otherJob = q.claim(1).get(0);

    List<List<Either<StaleAttempt, Finished>>> answers = new ArrayList<>();
    assertThatCode(() -> answers.add(q.completeAll(List.of(stale, otherJob, current))))
        .as("one batch holding two attempts of one job")
        .doesNotThrowAnyException();

    assertThat(answers.get(0).get(0).getLeft().currentAttempt()).contains(2L);
    assertThat(answers.get(0).get(1).get().state()).isEqualTo(JobState.DONE);
    assertThat(answers.get(0).get(2).get().attempt()).isEqualTo(2);
    assertThat(rows.get(id).state()).isEqualTo(JobState.DONE);
    assertThat(rows.get(other).state()).isEqualTo(JobState.DONE);
    assertThat(counter(registry, "nolock.queue.completions")).isEqualTo(2);
    assertThat(counter(registry, "nolock.queue.stale.finishes", "operation", "complete"))
        .isEqualTo(1);
  }

  @Test
  void completeWithWritesNothingForAStaleAttemptAndCommitsTheWritesOfTheCurrentOne() {
    schema.dsl().execute("CREATE TABLE IF NOT EXISTS effects (job_id bigint, attempt bigint)");
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("pay")));
    Job<String> stale = q.claim(1).get(0);
    rows.expireLease(id);
    q.reapExpired();
    Job<String> current = q.claim(1).get(0);

    Either<StaleAttempt, Integer> refused = q.completeWith(stale, tx -> insertEffect(tx, stale));
    assertThatThrownBy(
            () ->
                q.completeWith(
                    current,
                    tx -> {
                      insertEffect(tx, current);
                      throw new IllegalArgumentException("the handler's write failed");
                    }))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("the handler's write failed");
    assertThat(rows.get(id).state()).as("rolled back with the write").isEqualTo(JobState.RUNNING);
    Either<StaleAttempt, Integer> accepted =
        q.completeWith(current, tx -> insertEffect(tx, current));

    assertThat(refused.isLeft()).isTrue();
    assertThat(accepted).isEqualTo(Either.right(1));
    assertThat(
            schema
                .dsl()
                .fetch("SELECT attempt FROM effects WHERE job_id = ?", id)
                .getValues(0, Long.class))
        .containsExactly(2L);
    assertThat(rows.get(id).state()).isEqualTo(JobState.DONE);
  }

  private static int insertEffect(DSLContext tx, Job<?> job) {
    return tx.execute("INSERT INTO effects VALUES (?, ?)", job.id(), job.attempt());
  }

  @Test
  void completeWithWhoseWritesThrowACheckedExceptionRethrowsThatInstanceAndCommitsNothing() {
    schema.dsl().execute("CREATE TABLE IF NOT EXISTS effects (job_id bigint, attempt bigint)");
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("pay")));
    Job<String> job = q.claim(1).get(0);
    IOException offline = new IOException("the ledger is offline");

    assertThatThrownBy(
            () ->
                q.completeWith(
                    job,
                    tx -> {
                      insertEffect(tx, job);
                      throw offline;
                    }))
        .isSameAs(offline);

    assertThat(effects(id)).as("the writes, rolled back").isEmpty();
    JobRows.Row row = rows.get(id);
    assertThat(row.state()).as("the completion, rolled back").isEqualTo(JobState.RUNNING);
    assertThat(row.attempt()).isEqualTo(job.attempt());
    assertThat(row.failures()).isZero();
    // The control: the same attempt completes with the same writes, and they are seen committed.
    assertThat(q.completeWith(job, tx -> insertEffect(tx, job))).isEqualTo(Either.right(1));
    assertThat(effects(id)).containsExactly(job.attempt());
    assertThat(rows.get(id).state()).isEqualTo(JobState.DONE);
  }

  /**
   * A database failure of the writes' own is theirs, not the queue's: it reaches the caller as the
   * writes threw it, never translated as if the queue's statements had failed.
   */
  @Test
  void completeWithWhoseWritesBreakAUniqueKeyOfTheirOwnRethrowsThatExceptionUnchanged() {
    schema.dsl().execute("CREATE TABLE IF NOT EXISTS receipts (order_id bigint PRIMARY KEY)");
    schema.dsl().execute("INSERT INTO receipts VALUES (7) ON CONFLICT DO NOTHING");
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("receipt for order 7")));
    Job<String> job = q.claim(1).get(0);
    AtomicReference<DataAccessException> violation = new AtomicReference<>();

    Throwable thrown =
        catchThrowable(
            () ->
                q.completeWith(
                    job,
                    tx -> {
                      try {
                        return tx.execute("INSERT INTO receipts VALUES (7)");
                      } catch (DataAccessException e) {
                        violation.set(e);
                        throw e;
                      }
                    }));

    assertThat(violation.get()).as("the writes' own failure").isNotNull();
    assertThat(thrown).isSameAs(violation.get());
    assertThat(SqlErrors.isUniqueViolation(thrown)).isTrue();
    assertThat(rows.get(id).state()).isEqualTo(JobState.RUNNING);
    assertThat(q.complete(job).get().state()).isEqualTo(JobState.DONE);
  }

  /**
   * The same with a failure the queue would report as an outage had its own statement failed so (a
   * serialization failure, SQLSTATE 40001): the writes' one is not an unknown outcome, the
   * transaction rolled back.
   */
  @Test
  void completeWithWhoseWritesFailWithATransientStateOfTheirOwnIsNoOutage() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("transfer")));
    Job<String> job = q.claim(1).get(0);
    AtomicReference<DataAccessException> raised = new AtomicReference<>();

    Throwable thrown =
        catchThrowable(
            () ->
                q.completeWith(
                    job,
                    tx -> {
                      try {
                        return tx.execute(
                            "DO $$ BEGIN RAISE EXCEPTION 'the ledger refused the transfer'"
                                + " USING ERRCODE = '40001'; END $$");
                      } catch (DataAccessException e) {
                        raised.set(e);
                        throw e;
                      }
                    }));

    assertThat(raised.get()).as("the writes' own failure").isNotNull();
    assertThat(SqlErrors.isTransient(raised.get()))
        .as("a state the queue reports as outage")
        .isTrue();
    assertThat(thrown).isSameAs(raised.get()).isNotInstanceOf(BackendUnavailableException.class);
    assertThat(rows.get(id).state()).isEqualTo(JobState.RUNNING);
    assertThat(q.complete(job).get().state()).isEqualTo(JobState.DONE);
  }

  private static List<Long> effects(long id) {
    return schema
        .dsl()
        .fetch("SELECT attempt FROM effects WHERE job_id = ?", id)
        .getValues(0, Long.class);
  }

  @Test
  void aHeartbeatExtendsAnUnexpiredLeaseOnTheDatabaseClock() {
    JobQueue<String> q = queue(QueueConfig.custom(newQueueName()).lease(Duration.ofSeconds(5)));
    q.enqueue(NewJob.of("long"));
    Job<String> job = q.claim(1).get(0);

    Instant before = rows.dbNow();
    Job<String> extended = q.heartbeat(job).get();
    Instant after = rows.dbNow();

    assertThat(extended.lockedUntil()).isBetween(before.plusSeconds(5), after.plusSeconds(5));
    assertThat(extended.lockedUntil()).isAfter(job.lockedUntil());
    assertThat(rows.get(job.id()).lockedUntil()).isEqualTo(extended.lockedUntil());
    assertThat(extended.attempt()).isEqualTo(job.attempt());
  }

  @Test
  void thePoolsHeartbeatNeverWaitsForALockedJobNorKeepsTheOthersLocked() throws Exception {
    JobQueue<String> q = queue(QueueConfig.custom(newQueueName()).lease(Duration.ofSeconds(5)));
    q.enqueueAll(List.of(NewJob.of("a"), NewJob.of("b")));
    List<Job<String>> held = q.claim(2);
    Job<String> free = held.get(0);
    Job<String> locked = held.get(1);

    // Another transaction holds one job's row, as a worker finishing it does (and keeps doing
    // while that worker is paused between its UPDATE and its COMMIT).
    try (Connection finishing = schema.dataSource().getConnection()) {
      finishing.setAutoCommit(false);
      DSL.using(finishing, SQLDialect.POSTGRES)
          .execute("SELECT id FROM nolock_jobs WHERE id = ? FOR UPDATE", locked.id());

      List<io.vavr.control.Option<Job<String>>> extended =
          CompletableFuture.supplyAsync(() -> q.heartbeatAll(held)).get(5, TimeUnit.SECONDS);
      assertThat(extended.get(0).map(Job::id)).contains(free.id());
      assertThat(extended.get(1)).as("the locked job, skipped").isEmpty();

      // The extended job's row is not left locked: the reaper (SKIP LOCKED) could take it.
      rows.expireLease(free.id());
      assertThat(q.reapExpired()).isEqualTo(new ReapResult(1, 0));
      finishing.rollback();
    }
  }

  @Test
  void releaseHandsAJobBackUnrunWithoutCountingAFailure() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("later")));
    Job<String> job = q.claim(1).get(0);

    assertThat(q.release(job).get().state()).isEqualTo(JobState.READY);
    assertThat(rows.get(id).failures()).isZero();
    assertThat(q.claim(1)).extracting(Job::attempt).containsExactly(2L);
  }

  @Test
  void theReaperCountsAnExpiredLeaseAsAFailedAttemptAndDeadLettersTheLastOne() {
    JobQueue<String> q = queue();
    long twoLeft = id(q.enqueue(NewJob.of("a").maxAttempts(2)));
    long lastOne = id(q.enqueue(NewJob.of("b").maxAttempts(1)));
    long healthy = id(q.enqueue(NewJob.of("c")));
    q.claim(3);
    rows.expireLease(twoLeft);
    rows.expireLease(lastOne);

    assertThat(q.reapExpired()).isEqualTo(new ReapResult(1, 1));

    assertThat(rows.get(twoLeft).state()).isEqualTo(JobState.READY);
    assertThat(rows.get(twoLeft).failures()).isOne();
    assertThat(rows.get(lastOne).state()).isEqualTo(JobState.DEAD);
    assertThat(rows.get(lastOne).lastError()).contains("the lease of attempt 1 expired");
    assertThat(rows.get(healthy).state())
        .as("an unexpired lease is left alone")
        .isEqualTo(JobState.RUNNING);
  }

  // ---------------------------------------------------------------------------------------------
  // Retention

  @Test
  void vacuumRunsOnTheJobsTableAlsoThroughAPoolOfTransactionalConnections() {
    JobQueue<String> q = queue();
    for (int i = 0; i < 50; i++) {
      q.enqueue(NewJob.of("v" + i));
    }
    q.claim(50).forEach(job -> q.complete(job).get());
    long before = rows.vacuumCount();

    HikariConfig transactional = new HikariConfig();
    transactional.setJdbcUrl(schema.jdbcUrl());
    transactional.setAutoCommit(false); // VACUUM in a transaction block would fail
    transactional.setMaximumPoolSize(1);
    try (HikariDataSource pool = new HikariDataSource(transactional)) {
      JobQueue.create(pool, QueueConfig.custom(newQueueName()).build(), PayloadCodec.utf8())
          .vacuum();
    }
    q.vacuum();

    await()
        .atMost(Duration.ofSeconds(10))
        .untilAsserted(() -> assertThat(rows.vacuumCount()).isEqualTo(before + 2));
  }

  @Test
  void purgeDeletesOldFinishedJobsInBatchesAndKeepsEverythingElse() {
    String name = newQueueName();
    JobQueue<String> q = queue(QueueConfig.custom(name).purgeBatchSize(100));
    List<NewJob<String>> jobs = new ArrayList<>();
    for (int i = 0; i < 250; i++) {
      jobs.add(NewJob.of("done-" + i));
    }
    q.enqueueAll(jobs);
    q.claim(250).forEach(q::complete);
    rows.ageFinished(name, "2 hours");
    long dead = id(q.enqueue(NewJob.of("dead").maxAttempts(1)));
    q.fail(q.claim(1).get(0), "boom");
    long recent = id(q.enqueue(NewJob.of("recent")));
    q.complete(q.claim(1).get(0));
    long ready = id(q.enqueue(NewJob.of("ready")));

    PurgeResult purged = q.purgeFinished(Duration.ofHours(1));

    assertThat(purged).isEqualTo(new PurgeResult(250, 3));
    assertThat(rows.count(name, JobState.DONE)).isOne();
    assertThat(rows.find(dead)).isPresent();
    assertThat(rows.find(recent)).isPresent();
    assertThat(rows.find(ready)).isPresent();
  }

  @Test
  void purgeAndClaimsNeverWaitForEachOther() throws Exception {
    String name = newQueueName();
    JobQueue<String> q = queue(QueueConfig.custom(name).purgeBatchSize(10));
    List<NewJob<String>> jobs = new ArrayList<>();
    for (int i = 0; i < 30; i++) {
      jobs.add(NewJob.of("job-" + i));
    }
    q.enqueueAll(jobs);
    List<Job<String>> first = q.claim(20);
    first.forEach(q::complete);
    rows.ageFinished(name, "2 hours");

    // A purge batch in progress (its DELETE uncommitted) holds locks on finished rows only:
    // a claim goes straight past it.
    try (Connection purging = schema.dataSource().getConnection()) {
      purging.setAutoCommit(false);
      DSLContext tx = DSL.using(purging, SQLDialect.POSTGRES);
      int deleted =
          tx.execute(
              "DELETE FROM nolock_jobs WHERE id IN (SELECT id FROM nolock_jobs WHERE queue = ?"
                  + " AND state = 'done' ORDER BY id LIMIT 5)",
              name);
      assertThat(deleted).isEqualTo(5);
      List<Job<String>> claimed =
          CompletableFuture.supplyAsync(() -> q.claim(5)).get(5, TimeUnit.SECONDS);
      assertThat(claimed).hasSize(5);

      // And a purge skips what others hold instead of waiting for it.
      PurgeResult purged =
          CompletableFuture.supplyAsync(() -> q.purgeFinished(Duration.ofHours(1)))
              .get(5, TimeUnit.SECONDS);
      assertThat(purged.deleted()).isEqualTo(15);
      purging.rollback();
    }
    assertThat(q.purgeFinished(Duration.ofHours(1)).deleted()).isEqualTo(5);
  }

  // ---------------------------------------------------------------------------------------------
  // Stats, codecs

  @Test
  void readyStatsCountTheDueBacklogUpToTheCapAndTheOldestAge() {
    MeterRegistry registry = new SimpleMeterRegistry();
    String name = newQueueName();
    JobQueue<String> q =
        queue(
            QueueConfig.custom(name)
                .readyCountCap(3)
                .gaugeRefresh(Duration.ZERO)
                .metrics(registry, "it"));
    assertThat(q.readyStats()).isEqualTo(new ReadyStats(0, false, io.vavr.control.Option.none()));

    Instant now = rows.dbNow();
    for (int i = 0; i < 5; i++) {
      q.enqueue(NewJob.of("due-" + i).runAt(now.minusSeconds(60 + i)));
    }
    q.enqueue(NewJob.of("later").delay(Duration.ofHours(1)));

    ReadyStats stats = q.readyStats();
    assertThat(stats.readyJobs()).isEqualTo(3);
    assertThat(stats.capped()).isTrue();
    assertThat(stats.oldestReadyAge()).singleElement().matches(age -> age.toSeconds() >= 64);
    assertThat(
            registry
                .get("nolock.queue.ready")
                .tags("name", "it", "queue", name, "component", "queue")
                .gauge()
                .value())
        .isEqualTo(3.0);
    assertThat(registry.get("nolock.queue.oldest.ready.age").gauge().value())
        .isGreaterThanOrEqualTo(64.0);
  }

  @Test
  void payloadsTravelAsBytesThroughTheChosenCodec() {
    JobQueue<byte[]> bytes =
        JobQueue.create(
            schema.dataSource(), QueueConfig.ofDefaults(newQueueName()), PayloadCodec.bytes());
    bytes.enqueue(NewJob.of(new byte[] {0, 1, 2, (byte) 255}));
    assertThat(bytes.claim(1).get(0).payload()).containsExactly(0, 1, 2, 255);

    record Invoice(String id, int cents) {}
    PayloadCodec<Invoice> json =
        PayloadCodec.of(
            i ->
                ("{\"id\":\"" + i.id() + "\",\"cents\":" + i.cents() + "}")
                    .getBytes(java.nio.charset.StandardCharsets.UTF_8),
            b -> {
              String s = new String(b, java.nio.charset.StandardCharsets.UTF_8);
              String id = s.replaceAll(".*\"id\":\"([^\"]*)\".*", "$1");
              int cents = Integer.parseInt(s.replaceAll(".*\"cents\":(\\d+).*", "$1"));
              return new Invoice(id, cents);
            });
    JobQueue<Invoice> invoices =
        JobQueue.create(schema.dataSource(), QueueConfig.ofDefaults(newQueueName()), json);
    invoices.enqueue(NewJob.of(new Invoice("inv-42", 1999)));
    assertThat(invoices.claim(1).get(0).payload()).isEqualTo(new Invoice("inv-42", 1999));
  }

  @Test
  void aPayloadTheCodecCannotDecodeFailsItsAttemptInsteadOfBlockingTheQueue() {
    String name = newQueueName();
    JobQueue<String> writer = queue(QueueConfig.custom(name));
    JobQueue<String> picky =
        JobQueue.create(
            schema.dataSource(),
            QueueConfig.ofDefaults(name),
            PayloadCodec.of(
                s -> s.getBytes(java.nio.charset.StandardCharsets.UTF_8),
                b -> {
                  String s = new String(b, java.nio.charset.StandardCharsets.UTF_8);
                  if (s.startsWith("bad")) {
                    throw new IllegalArgumentException("not a valid payload: " + s);
                  }
                  return s;
                }));
    long bad = id(writer.enqueue(NewJob.of("bad one")));
    writer.enqueue(NewJob.of("good one"));

    assertThat(picky.claim(10)).extracting(Job::payload).containsExactly("good one");
    JobRows.Row row = rows.get(bad);
    assertThat(row.state()).isIn(JobState.READY, JobState.DEAD);
    assertThat(row.failures()).isOne();
    assertThat(row.lastError())
        .isEqualTo("the payload could not be decoded: java.lang.IllegalArgumentException");
  }

  @Test
  void metricsCarryTheInstanceNameAndTheQueueNameAndNeverAJobId() {
    MeterRegistry registry = new SimpleMeterRegistry();
    String name = newQueueName();
    JobQueue<String> q = queue(QueueConfig.custom(name).metrics(registry, "orders-eu"));
    q.enqueue(NewJob.of("x"));
    q.complete(q.claim(1).get(0));

    Set<String> tagKeys = new HashSet<>();
    registry.getMeters().forEach(m -> m.getId().getTags().forEach(t -> tagKeys.add(t.getKey())));
    assertThat(tagKeys).containsOnly("component", "name", "queue", "outcome", "operation");
    registry.getMeters().forEach(m -> assertThat(m.getId().getTag("name")).isEqualTo("orders-eu"));
    registry.getMeters().stream()
        .filter(m -> m.getId().getName().startsWith("nolock.queue."))
        .forEach(m -> assertThat(m.getId().getTag("queue")).isEqualTo(name));
    assertThat(registry.get("nolock.queue.claim.duration").timer().count()).isOne();
    assertThat(counter(registry, "nolock.queue.claimed")).isOne();
    assertThat(counter(registry, "nolock.queue.enqueued")).isOne();
  }

  @Test
  void twoInstancesOfOneQueueInOneRegistryCountApartByTheirInstanceNames() {
    MeterRegistry registry = new SimpleMeterRegistry();
    String name = newQueueName();
    JobQueue<String> producer = queue(QueueConfig.custom(name).metrics(registry, "producer"));
    JobQueue<String> consumer = queue(QueueConfig.custom(name).metrics(registry, "consumer"));
    producer.enqueue(NewJob.of("x"));
    producer.enqueue(NewJob.of("y"));
    consumer.complete(consumer.claim(1).get(0));

    assertThat(counter(registry, "nolock.queue.enqueued", "name", "producer")).isEqualTo(2);
    assertThat(counter(registry, "nolock.queue.enqueued", "name", "consumer")).isZero();
    assertThat(counter(registry, "nolock.queue.claimed", "name", "consumer")).isOne();
    assertThat(counter(registry, "nolock.queue.claimed", "name", "producer")).isZero();
  }
}
