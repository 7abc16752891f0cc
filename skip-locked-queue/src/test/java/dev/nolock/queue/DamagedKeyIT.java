package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A jobs table that lost its primary key on {@code id} after it was created holds two rows of one
 * job: a finish, heartbeat or administrative change that matches both is never reported as a
 * success, nor as a failure a retry gets past ({@code BackendUnavailableException}), but as the
 * damaged schema it is ({@link IllegalStateException} naming the key).
 */
@ExtendWith(PostgresExtension.class)
class DamagedKeyIT {

  private static final String TABLE = "damaged_jobs";
  private static final AtomicInteger QUEUES = new AtomicInteger();

  private static PostgresSchema schema;

  @BeforeAll
  static void createDamagedTable(PostgresSchema s) {
    schema = s;
    queue().createTableIfMissing();
    s.dsl().execute("ALTER TABLE " + TABLE + " DROP CONSTRAINT " + TABLE + "_pkey");
  }

  private static JobQueue<String> queue() {
    return JobQueue.create(
        schema.dataSource(),
        QueueConfig.custom("damaged-" + QUEUES.incrementAndGet()).table(TABLE).build(),
        PayloadCodec.utf8());
  }

  /** A second row with the same id and the same contents: what a lost primary key lets in. */
  private static void duplicate(long id) {
    schema.dsl().execute("INSERT INTO " + TABLE + " SELECT * FROM " + TABLE + " WHERE id = ?", id);
  }

  /** A running job of {@code q} whose row is there twice. */
  private static Job<String> claimedTwice(JobQueue<String> q) {
    q.enqueue(NewJob.of("x"));
    Job<String> job = q.claim(1).get(0);
    duplicate(job.id());
    return job;
  }

  private static long readyTwice(JobQueue<String> q) {
    long id = ((EnqueueResult.Enqueued) q.enqueue(NewJob.of("x"))).id();
    duplicate(id);
    return id;
  }

  private static void assertDamaged(ThrowingCallable call) {
    assertThatThrownBy(call)
        .isExactlyInstanceOf(IllegalStateException.class)
        .hasMessageContaining("changed 2 rows")
        .hasMessageContaining("(id)")
        .hasMessageContaining(TABLE);
  }

  @Test
  void aCompletionThatMatchesTwoRowsIsNeverACompletion() {
    JobQueue<String> q = queue();
    assertDamaged(() -> q.complete(claimedTwice(q)));
  }

  @Test
  void aBatchCompletionThatMatchesTwoRowsOfOneAttemptIsNeverACompletion() {
    JobQueue<String> q = queue();
    assertDamaged(() -> q.completeAll(List.of(claimedTwice(q))));
  }

  @Test
  void aCompletionWithWritesThatMatchesTwoRowsRunsNoWrites() {
    JobQueue<String> q = queue();
    Job<String> job = claimedTwice(q);
    AtomicBoolean wrote = new AtomicBoolean();
    assertDamaged(() -> q.completeWith(job, tx -> wrote.getAndSet(true)));
    assertThat(wrote).as("the caller's writes ran").isFalse();
  }

  @Test
  void aFailOrReleaseThatMatchesTwoRowsIsNeitherAFailNorARelease() {
    JobQueue<String> q = queue();
    assertDamaged(() -> q.fail(claimedTwice(q), "boom"));
    assertDamaged(() -> q.release(claimedTwice(q)));
  }

  @Test
  void aHeartbeatThatMatchesTwoRowsIsNeverAnExtension() {
    JobQueue<String> q = queue();
    assertDamaged(() -> q.heartbeat(claimedTwice(q)));
    assertDamaged(() -> q.heartbeatAll(List.of(claimedTwice(q))));
  }

  @Test
  void anAdministrativeChangeThatMatchesTwoRowsIsNeverAnAnswer() {
    JobQueue<String> q = queue();
    assertDamaged(() -> q.admin().cancel(readyTwice(q)));
    assertDamaged(
        () -> q.admin().reschedule(readyTwice(q), Instant.now().plus(1, ChronoUnit.HOURS)));

    q.enqueue(NewJob.of("dead").maxAttempts(1));
    Job<String> job = q.claim(1).get(0);
    q.fail(job, "boom");
    JobInfo<String> letter = q.admin().find(job.id()).get();
    duplicate(job.id());
    assertDamaged(() -> q.admin().retry(letter));
  }
}
