package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@code enqueue(tx, ...)} and {@code complete(tx, ...)} in the caller's transaction, opened on a
 * plain JDBC {@link Connection} or on a jOOQ context over one: the queue joins it, never commits or
 * rolls it back, and leaves the connection as it found it. What another session sees before the
 * caller's commit shows that nothing was committed early.
 */
@ExtendWith(PostgresExtension.class)
class CallerTransactionIT {

  private static final AtomicInteger QUEUES = new AtomicInteger();

  private static PostgresSchema schema;
  private static JobRows rows;

  @BeforeAll
  static void createTable(PostgresSchema s) {
    schema = s;
    JobQueue.create(s.dataSource(), QueueConfig.ofDefaults("setup"), PayloadCodec.utf8())
        .createTableIfMissing();
    s.dsl().execute("CREATE TABLE IF NOT EXISTS caller_ledger (entry text NOT NULL)");
    rows = new JobRows(s.dsl(), QueueConfig.DEFAULT_TABLE);
  }

  private static JobQueue<String> queue() {
    return JobQueue.create(
        schema.dataSource(),
        QueueConfig.ofDefaults("ctx" + QUEUES.incrementAndGet()),
        PayloadCodec.utf8());
  }

  private static Connection openTransaction() throws Exception {
    Connection c = schema.dataSource().getConnection();
    c.setAutoCommit(false);
    return c;
  }

  private static void ledger(Connection c, String entry) throws Exception {
    try (PreparedStatement s = c.prepareStatement("INSERT INTO caller_ledger (entry) VALUES (?)")) {
      s.setString(1, entry);
      s.executeUpdate();
    }
  }

  private static long ledgerRows(String entry) {
    return schema.dsl().fetchCount(DSL.table("caller_ledger"), DSL.field("entry").eq(entry));
  }

  private static long ready(JobQueue<String> q) {
    return rows.count(q.config().queue(), JobState.READY);
  }

  @Test
  void anEnqueueOnAPlainConnectionRollsBackWithTheCaller() throws Exception {
    JobQueue<String> q = queue();
    try (Connection c = openTransaction()) {
      ledger(c, q.config().queue() + "-rb");
      assertThat(q.enqueue(c, NewJob.of("rolled back"))).isInstanceOf(EnqueueResult.Enqueued.class);
      assertThat(ready(q)).as("seen by another session before the caller decides").isZero();
      c.rollback();
      assertThat(c.getAutoCommit()).as("the caller's connection mode").isFalse();
    }
    assertThat(ready(q)).isZero();
    assertThat(ledgerRows(q.config().queue() + "-rb")).isZero();
  }

  @Test
  void anEnqueueOnAPlainConnectionCommitsWithTheCallerExactlyOnce() throws Exception {
    JobQueue<String> q = queue();
    try (Connection c = openTransaction()) {
      ledger(c, q.config().queue() + "-c");
      q.enqueueAll(c, List.of(NewJob.of("committed")));
      assertThat(ready(q)).as("seen by another session before the caller's commit").isZero();
      c.commit();
    }
    assertThat(ready(q)).isOne();
    assertThat(ledgerRows(q.config().queue() + "-c")).isOne();
    assertThat(q.claim(10)).extracting(Job::payload).containsExactly("committed");
  }

  @Test
  void aCompletionOnAPlainConnectionRollsBackOrCommitsWithTheCaller() throws Exception {
    JobQueue<String> q = queue();
    q.enqueue(NewJob.of("work"));
    Job<String> job = q.claim(1).get(0);

    try (Connection c = openTransaction()) {
      assertThat(q.complete(c, job).get().state()).isEqualTo(JobState.DONE);
      assertThat(rows.get(job.id()).state())
          .as("seen by another session before the caller decides")
          .isEqualTo(JobState.RUNNING);
      c.rollback();
    }
    assertThat(rows.get(job.id()).state()).isEqualTo(JobState.RUNNING);

    try (Connection c = openTransaction()) {
      ledger(c, q.config().queue() + "-done");
      assertThat(q.complete(c, job).isRight()).isTrue();
      assertThat(rows.get(job.id()).state()).isEqualTo(JobState.RUNNING);
      c.commit();
    }
    assertThat(rows.get(job.id()).state()).isEqualTo(JobState.DONE);
    assertThat(ledgerRows(q.config().queue() + "-done")).isOne();
  }

  @Test
  void aPlainConnectionInAutocommitIsRefusedBeforeAnythingIsSent() throws Exception {
    JobQueue<String> q = queue();
    q.enqueue(NewJob.of("work"));
    Job<String> job = q.claim(1).get(0);
    try (Connection c = schema.dataSource().getConnection()) {
      c.setAutoCommit(true);
      assertThatThrownBy(() -> q.enqueue(c, NewJob.of("would commit on its own")))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("in no transaction");
      assertThatThrownBy(() -> q.complete(c, job))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("in no transaction");
    }
    assertThat(ready(q)).isZero();
    assertThat(rows.get(job.id()).state()).isEqualTo(JobState.RUNNING);
  }

  @Test
  void anEnqueueOnAContextOverAPlainConnectionNeitherCommitsNorEndsTheCallersTransaction()
      throws Exception {
    JobQueue<String> q = queue();
    try (Connection c = openTransaction()) {
      DSLContext tx = DSL.using(c, SQLDialect.POSTGRES);
      ledger(c, q.config().queue() + "-before");
      q.enqueue(tx, NewJob.of("rolled back"));
      assertThat(ready(q))
          .as("the job, seen by another session before the caller's commit")
          .isZero();
      assertThat(ledgerRows(q.config().queue() + "-before"))
          .as("the caller's earlier write, seen by another session before the caller's commit")
          .isZero();
      c.rollback();
    }
    assertThat(ready(q)).isZero();
    assertThat(ledgerRows(q.config().queue() + "-before")).isZero();

    try (Connection c = openTransaction()) {
      q.enqueue(DSL.using(c, SQLDialect.POSTGRES), NewJob.of("committed"));
      c.commit();
    }
    assertThat(ready(q)).isOne();
  }

  @Test
  void aCompletionOnAContextOverAPlainConnectionNeitherCommitsNorEndsTheCallersTransaction()
      throws Exception {
    JobQueue<String> q = queue();
    q.enqueue(NewJob.of("work"));
    Job<String> job = q.claim(1).get(0);
    try (Connection c = openTransaction()) {
      ledger(c, q.config().queue() + "-before");
      assertThat(q.complete(DSL.using(c, SQLDialect.POSTGRES), job).isRight()).isTrue();
      assertThat(rows.get(job.id()).state()).isEqualTo(JobState.RUNNING);
      assertThat(ledgerRows(q.config().queue() + "-before")).isZero();
      c.rollback();
    }
    assertThat(rows.get(job.id()).state()).isEqualTo(JobState.RUNNING);
    assertThat(ledgerRows(q.config().queue() + "-before")).isZero();
  }
}
