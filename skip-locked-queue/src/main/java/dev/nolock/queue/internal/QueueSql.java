package dev.nolock.queue.internal;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.sql.SqlNames;
import dev.nolock.queue.JobState;
import dev.nolock.queue.QueueConfig;
import dev.nolock.queue.StaleAttempt;
import io.vavr.control.Option;
import java.sql.Connection;
import java.time.OffsetDateTime;
import java.util.Optional;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.Record3;
import org.jooq.SQLDialect;
import org.jooq.conf.Settings;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;

/**
 * What every part of one queue shares: the pool, the jOOQ context with the queue's statement
 * timeout, the table's statements, the queue's name and meters, and the one translation of a jOOQ
 * failure into a {@link BackendUnavailableException} that names the queue and the step.
 */
public final class QueueSql {

  /** PostgreSQL's SQLSTATE for a unique violation. */
  public static final String PG_UNIQUE_VIOLATION = "23505";

  private final DataSource dataSource;
  private final QueueConfig config;
  private final DSLContext dsl;
  private final JobsTable jobs;
  private final String queue;
  private final QueueMetrics metrics;

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
   * Runs {@code body}, turning a jOOQ failure into a {@link BackendUnavailableException} whose
   * message says what was being done ({@code doing}, which also says what is known of the outcome).
   */
  public <R> R translate(Supplier<String> doing, Supplier<R> body) {
    try {
      return body.get();
    } catch (DataAccessException e) {
      throw new BackendUnavailableException(
          "PostgreSQL failed while "
              + doing.get()
              + " (queue \""
              + queue
              + "\", table "
              + jobs
              + "). Retry later. Cause: "
              + e.getMessage(),
          e);
    }
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
