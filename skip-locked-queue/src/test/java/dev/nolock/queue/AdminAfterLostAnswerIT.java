package dev.nolock.queue;

import static dev.nolock.testkit.JdbcFaults.sqlContaining;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.queue.QueueAdmin.Cancelled;
import dev.nolock.queue.QueueAdmin.Rescheduled;
import dev.nolock.queue.QueueAdmin.Revived;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Either;
import java.time.Duration;
import java.time.Instant;
import java.time.temporal.ChronoUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Administrative calls whose first answer was lost ({@link JdbcFaults}: the server ran the
 * statement, the connection dropped before the answer), then sent again: the resend reports what
 * the first call did, not a refusal such as "unknown job" or "not dead".
 */
@ExtendWith(PostgresExtension.class)
class AdminAfterLostAnswerIT {

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

  private static JobQueue<String> queue() {
    return JobQueue.create(
        faults.dataSource(),
        QueueConfig.ofDefaults("lost-" + QUEUES.incrementAndGet()),
        PayloadCodec.utf8());
  }

  private static long id(EnqueueResult result) {
    return ((EnqueueResult.Enqueued) result).id();
  }

  @Test
  void aCancelResentAfterItsAnswerWasLostAnswersCancelled() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("x")));
    InjectedFault lost =
        faults.onNextStatement(FaultKind.ANSWER_LOST, sqlContaining("\"state\" = 'cancelled'"));
    assertThat(catchThrowable(() -> q.admin().cancel(id)))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("cancel it again");
    lost.assertFired();
    assertThat(rows.get(id).state()).as("the lost cancel landed").isEqualTo(JobState.CANCELLED);

    Either<AdminRefusal.CancelRefusal, Cancelled> resent = q.admin().cancel(id);

    assertThat(resent)
        .as("the resent cancel")
        .isEqualTo(Either.right(new Cancelled(id, rows.get(id).finishedAt(), false)));
    assertThat(q.claim(10)).isEmpty();
  }

  @Test
  void aCancelWhoseRequestWasLostCancelsWhenResent() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("x")));
    InjectedFault lost =
        faults.onNextStatement(FaultKind.REQUEST_LOST, sqlContaining("\"state\" = 'cancelled'"));
    assertThat(catchThrowable(() -> q.admin().cancel(id)))
        .isInstanceOf(BackendUnavailableException.class);
    lost.assertFired();
    assertThat(rows.get(id).state()).as("nothing landed").isEqualTo(JobState.READY);

    assertThat(q.admin().cancel(id).get().byThisCall()).as("the resent cancel").isTrue();
  }

  @Test
  void aRetryResentAfterItsAnswerWasLostAnswersRevivedAndTheJobWasRevivedOnce() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("poison").maxAttempts(1)));
    q.fail(q.claim(1).get(0), "boom");
    JobInfo<String> letter = q.admin().find(id).get();
    InjectedFault lost =
        faults.onNextStatement(FaultKind.ANSWER_LOST, sqlContaining("\"state\" = 'dead'"));
    assertThat(catchThrowable(() -> q.admin().retry(letter)))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("retry it again");
    lost.assertFired();

    assertThat(q.admin().retry(letter))
        .as("the resent retry")
        .isEqualTo(Either.right(new Revived(id, 1, false)));
    JobRows.Row revived = rows.get(id);
    assertThat(revived.state()).isEqualTo(JobState.READY);
    assertThat(revived.failures()).isZero();

    Job<String> rerun = q.claim(1).get(0);
    q.fail(rerun, "boom again");
    assertThat(q.admin().retry(letter))
        .as("resent once the revived job ran and died again: the letter it named was revived")
        .isEqualTo(Either.right(new Revived(id, 1, false)));
    assertThat(rows.get(id).state())
        .as("the new dead letter is not revived")
        .isEqualTo(JobState.DEAD);
  }

  @Test
  void aRescheduleResentAfterItsAnswerWasLostAnswersRescheduledEvenOnceTheTimeHasPassed() {
    JobQueue<String> q = queue();
    long id = id(q.enqueue(NewJob.of("x").delay(Duration.ofHours(1))));
    // Far enough ahead that the first reschedule is never refused as "into the past" on a loaded
    // machine, near enough that waiting for it to pass stays short.
    Instant at = rows.dbNow().plusSeconds(2).truncatedTo(ChronoUnit.MICROS);
    InjectedFault lost =
        faults.onNextStatement(FaultKind.ANSWER_LOST, sqlContaining("set \"run_at\" = "));
    assertThat(catchThrowable(() -> q.admin().reschedule(id, at)))
        .isInstanceOf(BackendUnavailableException.class)
        .hasMessageContaining("reschedule it again");
    lost.assertFired();
    assertThat(rows.get(id).runAt()).as("the lost reschedule landed").isEqualTo(at);

    org.awaitility.Awaitility.await()
        .atMost(Duration.ofSeconds(10))
        .until(() -> rows.dbNow().isAfter(at));
    assertThat(q.admin().reschedule(id, at))
        .as("resent after the requested time passed on the database's clock")
        .isEqualTo(Either.right(new Rescheduled(id, at, false)));
  }
}
