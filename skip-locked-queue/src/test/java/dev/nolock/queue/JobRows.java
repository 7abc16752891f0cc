package dev.nolock.queue;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.Optional;
import org.jooq.DSLContext;
import org.jooq.Record;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/** Test-side peeks at, and direct edits of, the jobs table (never through the queue's API). */
final class JobRows {

  /** One job row as stored. */
  record Row(
      long id,
      String queue,
      JobState state,
      long attempt,
      int failures,
      int maxAttempts,
      Instant runAt,
      Instant lockedUntil,
      String uniqueKey,
      String lastError,
      Instant finishedAt) {}

  private final DSLContext dsl;
  private final Table<Record> table;
  private final String tableName;

  JobRows(DSLContext dsl, String table) {
    this.dsl = dsl;
    this.table = table(name(table.split("\\.")));
    this.tableName = table;
  }

  /** VACUUMs of the table so far (not autovacuum's), as PostgreSQL's statistics count them. */
  long vacuumCount() {
    Object count =
        dsl.fetchValue(
            "SELECT vacuum_count FROM pg_stat_user_tables WHERE schemaname = current_schema() AND"
                + " relname = ?",
            tableName);
    return ((Number) count).longValue();
  }

  /** The database's clock now. */
  Instant dbNow() {
    return dsl.select(field("clock_timestamp()", SQLDataType.TIMESTAMPWITHTIMEZONE))
        .fetchSingle()
        .value1()
        .toInstant();
  }

  Optional<Row> find(long id) {
    return dsl.selectFrom(table).where(field(name("id")).eq(id)).fetchOptional().map(JobRows::row);
  }

  Row get(long id) {
    return find(id).orElseThrow(() -> new AssertionError("no job " + id));
  }

  long count(String queue, JobState state) {
    return dsl.fetchCount(
        table, field(name("queue")).eq(queue).and(field(name("state")).eq(state.sqlValue())));
  }

  /** Moves the job's lease into the past, as if its worker had paused past it. */
  void expireLease(long id) {
    dsl.update(table)
        .set(
            field(name("locked_until"), SQLDataType.TIMESTAMPWITHTIMEZONE),
            field("clock_timestamp() - interval '1 second'", SQLDataType.TIMESTAMPWITHTIMEZONE))
        .where(field(name("id")).eq(id))
        .execute();
  }

  /** Makes a job's run_at come now, as if its backoff had passed. */
  void makeDue(long id) {
    dsl.update(table)
        .set(
            field(name("run_at"), SQLDataType.TIMESTAMPWITHTIMEZONE),
            field(
                "clock_timestamp() - interval '1 millisecond'", SQLDataType.TIMESTAMPWITHTIMEZONE))
        .where(field(name("id")).eq(id))
        .execute();
  }

  /** Moves finished_at of the queue's done jobs into the past. */
  void ageFinished(String queue, String interval) {
    dsl.update(table)
        .set(
            field(name("finished_at"), SQLDataType.TIMESTAMPWITHTIMEZONE),
            field(
                "finished_at - cast({0} as interval)",
                SQLDataType.TIMESTAMPWITHTIMEZONE, DSL.val(interval)))
        .where(field(name("queue")).eq(queue))
        .and(field(name("state")).eq("done"))
        .execute();
  }

  private static Row row(Record r) {
    return new Row(
        r.get("id", Long.class),
        r.get("queue", String.class),
        JobState.fromSql(r.get("state", String.class)),
        r.get("attempt", Long.class),
        r.get("failures", Integer.class),
        r.get("max_attempts", Integer.class),
        instant(r.get("run_at", OffsetDateTime.class)),
        instant(r.get("locked_until", OffsetDateTime.class)),
        r.get("unique_key", String.class),
        r.get("last_error", String.class),
        instant(r.get("finished_at", OffsetDateTime.class)));
  }

  private static Instant instant(OffsetDateTime t) {
    return t == null ? null : t.toInstant();
  }
}
