package dev.nolock.schedule;

import java.time.Instant;
import java.time.OffsetDateTime;
import java.util.List;
import java.util.Optional;
import org.jooq.DSLContext;
import org.jooq.Record;

/** Reads the runs table the way an operator would, for assertions. */
final class Runs {

  /** One row of the runs table. */
  record Row(
      Instant scheduledAt,
      String state,
      long attempt,
      String owner,
      Instant coversFrom,
      long missed,
      String lastError) {}

  private final DSLContext db;
  private final String table;

  Runs(DSLContext db, String table) {
    this.db = db;
    this.table = table;
  }

  Runs(DSLContext db) {
    this(db, ScheduleConfig.DEFAULT_TABLE);
  }

  List<Row> of(String job) {
    return db.resultQuery(
            "SELECT scheduled_at, state, attempt, owner, covers_from, missed, last_error FROM "
                + table
                + " WHERE job = ? ORDER BY scheduled_at",
            job)
        .fetch(Runs::row);
  }

  Optional<Row> at(String job, Instant scheduledAt) {
    return of(job).stream().filter(r -> r.scheduledAt().equals(scheduledAt)).findFirst();
  }

  /** Ends the lease of a run now, as if its instance had been paused past it. */
  void expireLease(String job, Instant scheduledAt) {
    db.execute(
        "UPDATE "
            + table
            + " SET locked_until = clock_timestamp() - interval '1 second'"
            + " WHERE job = ? AND scheduled_at = CAST(? AS timestamptz)",
        job,
        OffsetDateTime.ofInstant(scheduledAt, java.time.ZoneOffset.UTC));
  }

  private static Row row(Record r) {
    return new Row(
        r.get(0, OffsetDateTime.class).toInstant(),
        r.get(1, String.class),
        r.get(2, Long.class),
        r.get(3, String.class),
        r.get(4, OffsetDateTime.class).toInstant(),
        r.get(5, Long.class),
        r.get(6, String.class));
  }
}
