package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.ErrorDescriber;
import dev.nolock.testkit.CapturedStderr;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What the queue records of a failure carries no payload data: a handler's exception message (which
 * quotes whatever the handler was working on) and a codec's (a JSON mapper quotes the input it
 * could not read) stay out of {@code last_error} and out of the log lines the queue writes, which
 * name the exception's class, the job and the attempt; and a statement of the queue's own that
 * PostgreSQL refuses is reported without the row's values.
 */
@ExtendWith(PostgresExtension.class)
class NoPayloadInErrorsIT {

  private static final String CARD = "4111-1111-1111-1111";
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

  private static QueueConfig.Builder newQueue() {
    return QueueConfig.custom("e" + QUEUES.incrementAndGet())
        .maxAttempts(1)
        .backoff(Duration.ZERO, Duration.ofMillis(1));
  }

  private static JobQueue<String> queue(QueueConfig.Builder config) {
    return JobQueue.create(schema.dataSource(), config.build(), PayloadCodec.utf8());
  }

  private static long id(EnqueueResult result) {
    return ((EnqueueResult.Enqueued) result).id();
  }

  /** Runs {@code q}'s one job through a pool whose handler throws, until it is dead. */
  private static JobRows.Row runToDeath(JobQueue<String> q, long id) {
    try (WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom().listen(false).pollInterval(Duration.ofMillis(50)).build(),
            job -> {
              throw new IllegalStateException(
                  "card " + CARD + " declined", new IOException("gateway answered for " + CARD));
            })) {
      await().atMost(Duration.ofSeconds(10)).until(() -> rows.get(id).state() == JobState.DEAD);
    }
    return rows.get(id);
  }

  @Test
  void aHandlersFailureIsStoredAndLoggedByItsClassNamesWithoutItsMessages() {
    JobQueue<String> q = queue(newQueue());
    long id = id(q.enqueue(NewJob.of("pay")));
    JobRows.Row row;
    String logged;
    try (CapturedStderr log = new CapturedStderr()) {
      row = runToDeath(q, id);
      logged = log.text();
    }
    assertThat(row.lastError())
        .isEqualTo("java.lang.IllegalStateException; caused by java.io.IOException");
    assertThat(logged)
        .doesNotContain("4111")
        .contains("job " + id + " attempt 1 failed")
        .contains("java.lang.IllegalStateException; caused by java.io.IOException");
  }

  /** The negative control: with the messages kept, the same failure's text is there to see. */
  @Test
  void withTheMessagesDescriberTheHandlersMessagesAreStoredAndLogged() {
    JobQueue<String> q = queue(newQueue().errorDescriber(ErrorDescriber.messages()));
    long id = id(q.enqueue(NewJob.of("pay")));
    JobRows.Row row;
    String logged;
    try (CapturedStderr log = new CapturedStderr()) {
      row = runToDeath(q, id);
      logged = log.text();
    }
    String described =
        "java.lang.IllegalStateException: card "
            + CARD
            + " declined; caused by java.io.IOException: gateway answered for "
            + CARD;
    assertThat(row.lastError()).isEqualTo(described);
    assertThat(logged).contains("job " + id + " attempt 1 failed: " + described);
  }

  /** What earlier versions stored, for whoever wants it back: the stack trace. */
  @Test
  void withTheStackTracesDescriberTheStackTraceIsStored() {
    JobQueue<String> q = queue(newQueue().errorDescriber(ErrorDescriber.stackTraces()));
    long id = id(q.enqueue(NewJob.of("pay")));
    assertThat(runToDeath(q, id).lastError())
        .startsWith("java.lang.IllegalStateException: card " + CARD + " declined")
        .contains("at dev.nolock.queue.NoPayloadInErrorsIT")
        .contains("Caused by: java.io.IOException: gateway answered for " + CARD);
  }

  /** A describer of the user's own that fails does not keep the attempt from failing. */
  @Test
  void aDescriberThatThrowsIsReplacedByTheClassNames() {
    JobQueue<String> q =
        queue(
            newQueue()
                .errorDescriber(
                    e -> {
                      throw new UnsupportedOperationException("not this one");
                    }));
    long id = id(q.enqueue(NewJob.of("pay")));
    assertThat(runToDeath(q, id).lastError())
        .isEqualTo(
            "java.lang.IllegalStateException; caused by java.io.IOException (the error describer"
                + " threw java.lang.UnsupportedOperationException)");
  }

  @Test
  void aPayloadTheCodecCannotDecodeIsNotQuotedInLastErrorNorInTheLog() {
    String name = "e" + QUEUES.incrementAndGet();
    JobQueue<String> writer = queue(QueueConfig.custom(name).maxAttempts(1));
    JobQueue<String> json =
        JobQueue.create(schema.dataSource(), QueueConfig.ofDefaults(name), unreadable());
    long id = id(writer.enqueue(NewJob.of("card " + CARD)));
    String logged;
    try (CapturedStderr log = new CapturedStderr()) {
      assertThat(json.claim(10)).isEmpty();
      logged = log.text();
    }
    JobRows.Row row = rows.get(id);
    assertThat(row.state()).isEqualTo(JobState.DEAD);
    assertThat(row.lastError())
        .isEqualTo("the payload could not be decoded: java.lang.IllegalArgumentException");
    assertThat(logged)
        .doesNotContain("4111")
        .contains("Job " + id)
        .contains("java.lang.IllegalArgumentException");

    // The negative control: the queue's describer keeping messages stores the codec's quote.
    JobQueue<String> verbose =
        JobQueue.create(
            schema.dataSource(),
            QueueConfig.custom(name).errorDescriber(ErrorDescriber.messages()).build(),
            unreadable());
    long again = id(writer.enqueue(NewJob.of("card " + CARD)));
    assertThat(verbose.claim(10)).isEmpty();
    assertThat(rows.get(again).lastError())
        .startsWith("the payload could not be decoded: java.lang.IllegalArgumentException:")
        .contains("card " + CARD);
  }

  /**
   * A recursive decoder overflows its stack on a deeply nested poison payload: the attempt fails
   * like any other decode failure, and the rest of the batch is claimed and returned.
   */
  @Test
  void aDecoderThatOverflowsItsStackFailsThatJobAloneAndTheClaimGoesOn() {
    String name = "e" + QUEUES.incrementAndGet();
    JobQueue<String> writer = queue(QueueConfig.custom(name).maxAttempts(1));
    JobQueue<String> recursive =
        JobQueue.create(
            schema.dataSource(),
            QueueConfig.ofDefaults(name),
            PayloadCodec.of(
                s -> s.getBytes(StandardCharsets.UTF_8),
                b -> {
                  String text = new String(b, StandardCharsets.UTF_8);
                  if (text.startsWith("[[[[")) {
                    throw new StackOverflowError();
                  }
                  return text;
                }));
    long poison = id(writer.enqueue(NewJob.of("[[[[ " + CARD)));
    long fine = id(writer.enqueue(NewJob.of("fine")));

    List<Job<String>> claimed = recursive.claim(10);

    assertThat(claimed).extracting(Job::id).containsExactly(fine);
    assertThat(rows.get(poison).state()).isEqualTo(JobState.DEAD);
    assertThat(rows.get(poison).lastError())
        .isEqualTo("the payload could not be decoded: java.lang.StackOverflowError");
  }

  /** What a JSON mapper says of input it cannot read: it quotes the input. */
  private static PayloadCodec<String> unreadable() {
    return PayloadCodec.of(
        s -> s.getBytes(StandardCharsets.UTF_8),
        b -> {
          throw new IllegalArgumentException(
              "Unrecognized token 'card': was expecting JSON at [Source: "
                  + new String(b, StandardCharsets.UTF_8)
                  + "; line: 1]");
        });
  }

  /**
   * The queue's own insert refused by a constraint the table gained after it was created: the
   * exception the caller gets says what was refused and why (the SQLState, the constraint) without
   * the row's values, which stay in its cause.
   */
  @Test
  void anEnqueueTheTableRefusesIsReportedWithoutTheRowsValues() {
    String table = "refusing_jobs";
    JobQueue<String> first = queue(newQueue().table(table));
    first.createTableIfMissing();
    schema
        .dsl()
        .execute(
            "ALTER TABLE "
                + table
                + " ADD CONSTRAINT numeric_payloads"
                + " CHECK (convert_from(payload, 'UTF8')::bigint > 0),"
                + " ADD CONSTRAINT no_cards CHECK (unique_key NOT LIKE '%4111%'),"
                + " ADD CONSTRAINT one_key_for_all_queues UNIQUE (unique_key)");
    JobQueue<String> second = queue(newQueue().table(table));
    first.enqueue(NewJob.of("1").uniqueKey("order-" + CARD.replace("4111", "5500")));

    assertRefusedWithoutTheValues(
        "a cast in a CHECK, whose primary message quotes the payload",
        () -> first.enqueue(NewJob.of("card " + CARD)),
        "22P02");
    assertRefusedWithoutTheValues(
        "a CHECK violation, whose DETAIL quotes the row",
        () -> first.enqueue(NewJob.of("2").uniqueKey("order-" + CARD)),
        "23514");
    assertRefusedWithoutTheValues(
        "a unique violation in another queue of the table, whose DETAIL quotes the key",
        () -> second.enqueue(NewJob.of("3").uniqueKey("order-" + CARD.replace("4111", "5500"))),
        "23505");
  }

  private static void assertRefusedWithoutTheValues(
      String what, Runnable enqueue, String sqlState) {
    Throwable thrown = catchThrowable(enqueue::run);
    assertThat(thrown).as(what).isInstanceOf(IllegalArgumentException.class);
    assertThat(thrown.getMessage())
        .as(what)
        .contains("enqueueing 1 job(s)")
        .contains(sqlState)
        .doesNotContain("4111")
        .doesNotContain("5500");
    StringBuilder causes = new StringBuilder();
    for (Throwable t = thrown.getCause(); t != null; t = t.getCause()) {
      causes.append(t.getMessage()).append('\n');
    }
    assertThat(causes.toString())
        .as(what + ": the cause keeps what the server said")
        .containsAnyOf("4111", "5500");
  }
}
