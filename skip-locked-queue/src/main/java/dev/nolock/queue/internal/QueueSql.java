package dev.nolock.queue.internal;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.sql.PgClock;
import dev.nolock.patterns.sql.RenderedStatement;
import dev.nolock.patterns.sql.SqlErrors;
import dev.nolock.patterns.sql.SqlNames;
import dev.nolock.queue.JobState;
import dev.nolock.queue.QueueConfig;
import dev.nolock.queue.StaleAttempt;
import io.vavr.control.Option;
import java.sql.Connection;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.Optional;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.Record;
import org.jooq.Record3;
import org.jooq.Result;
import org.jooq.ResultQuery;
import org.jooq.SQLDialect;
import org.jooq.conf.Settings;
import org.jooq.impl.DSL;

/**
 * What every part of one queue shares: the pool, the jOOQ context with the queue's statement
 * timeout, the table's statements, the queue's name and meters, the shared failure policy ({@link
 * SqlErrors}) with the queue and the step named, and the check that a single-job statement changed
 * at most one row.
 */
public final class QueueSql {

  /** The key every single-job statement matches by, for {@link SqlErrors#atMostOneRow}. */
  private static final String KEY = "(id)";

  private final DataSource dataSource;
  private final QueueConfig config;
  private final DSLContext dsl;
  private final JobsTable jobs;
  private final String queue;
  private final QueueMetrics metrics;
  private final RenderedStatement claim;
  private final RenderedStatement complete;

  public QueueSql(DataSource dataSource, QueueConfig config) {
    if (dataSource == null || config == null) {
      throw new IllegalArgumentException(
          "JobQueue.create needs a DataSource (a pool such as HikariCP) and a QueueConfig (e.g."
              + " QueueConfig.ofDefaults(\"receipts\")); got "
              + (dataSource == null ? "no DataSource" : "no QueueConfig"));
    }
    this.dataSource = dataSource;
    this.config = config;
    this.queue = config.queue();
    Settings settings =
        new Settings().withQueryTimeout(Math.toIntExact(config.queryTimeout().toSeconds()));
    this.dsl = DSL.using(dataSource, SQLDialect.POSTGRES, settings);
    this.jobs = new JobsTable(SqlNames.requireSqlIdentifier("jobs table", config.table()));
    this.metrics =
        new QueueMetrics(
            config.registry().getOrNull(), config.metricsInstanceName().getOrNull(), queue);
    // Every job passes through these two: built and rendered once (RenderedStatement).
    this.claim = RenderedStatement.of(dsl, jobs.claim(dsl, queue, 1, config.lease()));
    this.complete = RenderedStatement.of(dsl, jobs.complete(dsl, queue, 0, 0));
  }

  /**
   * {@link JobsTable#claim} on this queue, rendered once: the same statement, read as the same
   * fields.
   */
  public ResultQuery<Record> claim(DSLContext on, int max, Duration lease) {
    return claim.fetch(on, queue, max, PgClock.ceilMillis(lease));
  }

  /**
   * {@link JobsTable#complete} on this queue, rendered once: the same statement; its one field is
   * {@code run_at}.
   */
  public ResultQuery<Record> complete(DSLContext on, long jobId, long jobAttempt) {
    return complete.fetch(on, null, queue, jobId, jobAttempt);
  }

  public DataSource dataSource() {
    return dataSource;
  }

  public QueueConfig config() {
    return config;
  }

  public DSLContext dsl() {
    return dsl;
  }

  /**
   * A context on the caller's {@code connection}, with this queue's settings: its connection
   * provider hands out that one connection and never closes, commits or rolls it back, so the
   * statements join whatever transaction the caller has open on it.
   */
  public DSLContext onCallerConnection(Connection connection) {
    if (connection == null) {
      throw new IllegalArgumentException(
          "The caller's connection is null: pass the JDBC connection your transaction is open on"
              + " (autoCommit false), or use the method without a transaction.");
    }
    return dsl.configuration().derive(connection).dsl();
  }

  /** Refuses a null caller's context with a message that says what to pass. */
  public static DSLContext requireCallerContext(DSLContext tx) {
    if (tx == null) {
      throw new IllegalArgumentException(
          "The caller's transaction context is null: pass the DSLContext of your open transaction"
              + " (e.g. cfg.dsl() inside dsl.transaction(cfg -> ...)), or use the method without"
              + " one.");
    }
    return tx;
  }

  public JobsTable jobs() {
    return jobs;
  }

  public String queue() {
    return queue;
  }

  public QueueMetrics metrics() {
    return metrics;
  }

  /**
   * Runs {@code body} under the shared failure policy ({@link SqlErrors#run}): a failure a retry
   * can get past (the connection, a timeout, a concurrent transaction) is a {@link
   * BackendUnavailableException}; one a retry would repeat (a missing table or privilege, a refused
   * value) is an {@link IllegalStateException} or {@link IllegalArgumentException}. The message
   * says what was being done ({@code doing}, which also says what is known of the outcome) on which
   * queue and table.
   */
  public <R> R run(Supplier<String> doing, Supplier<R> body) {
    return SqlErrors.run(
        () -> doing.get() + " (queue \"" + queue + "\", table " + jobs + ")", body);
  }

  /**
   * The row {@code statement} changed, which matches one job by its key ({@code queue, id}): none,
   * or that one ({@link SqlErrors#atMostOneRow}). More than one is a table that lost its primary
   * key, never a success.
   *
   * @param what the statement, e.g. {@code "completion of job 5 attempt 2"}
   * @throws IllegalStateException when it changed more than one row
   */
  public <R extends Record> Optional<R> atMostOne(ResultQuery<R> statement, String what) {
    Result<R> rows = statement.fetch();
    atMostOneRow(rows.size(), what);
    return rows.isEmpty() ? Optional.empty() : Optional.of(rows.get(0));
  }

  /**
   * {@link SqlErrors#atMostOneRow} for a statement that changed {@code rows} rows of one job, on
   * this queue's table and key.
   *
   * @throws IllegalStateException when {@code rows > 1}
   */
  public boolean atMostOneRow(int rows, String what) {
    return SqlErrors.atMostOneRow(rows, what, jobs, KEY);
  }

  /** The refusal of attempt {@code attempt} of job {@code id}, with the job as it is now. */
  public StaleAttempt staleAttempt(DSLContext on, long id, long attempt) {
    return toStale(id, attempt, jobs.current(on, queue, id).fetchOptional());
  }

  static StaleAttempt toStale(
      long id, long attempt, Optional<Record3<String, Long, OffsetDateTime>> now) {
    return new StaleAttempt(
        id,
        attempt,
        Option.ofOptional(now.map(r -> JobState.fromSql(r.value1()))),
        Option.ofOptional(now.map(Record3::value2)));
  }
}
