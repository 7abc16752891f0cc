package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.SchemaMismatchException;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Instant;
import java.util.List;
import org.jooq.DSLContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The shipped DDL: idempotent, schema-qualified, and the same as the README's Schema section. */
@ExtendWith(PostgresExtension.class)
class SchemaIT {

  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");

  @Test
  void theReadmeSchemaAndCreateTableIfMissingMakeTheSameTable(PostgresSchema schema)
      throws IOException {
    DSLContext db = schema.dsl();
    db.execute(readmeSchema()); // creates nolock_scheduled_runs as the README shows it
    String qualified = schema.schemaName() + ".runs_from_code";
    ScheduledSingleton fromCode =
        ScheduledSingleton.plain(
            schema.dataSource(),
            ScheduleConfig.custom("ddl", EVERY_MINUTE).table(qualified).build(),
            run -> {});
    fromCode.createTableIfMissing();
    fromCode.createTableIfMissing(); // idempotent

    assertThat(columns(db, "runs_from_code")).isEqualTo(columns(db, "nolock_scheduled_runs"));
    assertThat(indexes(db, "runs_from_code"))
        .containsExactlyInAnyOrder("runs_from_code_pkey", "runs_from_code_expiry_idx");
    assertThat(fromCode.ddl()).hasSize(2).allMatch(sql -> sql.contains(qualified.split("\\.")[1]));
  }

  @Test
  void aSchemaQualifiedTableCarriesRuns(PostgresSchema schema) {
    String qualified = schema.schemaName() + ".app_runs";
    MutableClock clock = new MutableClock(Instant.parse("2026-03-10T10:00:30Z"));
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            schema.dataSource(),
            ScheduleConfig.custom("qualified", EVERY_MINUTE)
                .table(qualified)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .build(),
            run -> {})) {
      instance.createTableIfMissing();
      clock.set(Instant.parse("2026-03-10T10:01:00.100Z"));

      assertThat(instance.runDueNow()).singleElement().isInstanceOf(RunOutcome.Finished.class);
    }
    assertThat(new Runs(schema.dsl(), qualified).of("qualified")).hasSize(1);
  }

  /**
   * A runs table dropped under a running scheduler: a retry would meet the same missing table, so
   * the pass says what to fix ({@code IllegalStateException} with the server's message and
   * SQLState) instead of a retryable {@code BackendUnavailableException}.
   */
  @Test
  void aDroppedTableIsReportedAsAFaultARetryWouldRepeat(PostgresSchema schema) {
    String qualified = schema.schemaName() + ".dropped_runs";
    MutableClock clock = new MutableClock(Instant.parse("2026-03-10T10:00:30Z"));
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            schema.dataSource(),
            ScheduleConfig.custom("dropped", EVERY_MINUTE)
                .table(qualified)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .build(),
            run -> {})) {
      instance.createTableIfMissing();
      schema.dsl().execute("DROP TABLE " + qualified);
      clock.set(Instant.parse("2026-03-10T10:01:00.100Z"));

      assertThatThrownBy(instance::runDueNow)
          .isExactlyInstanceOf(IllegalStateException.class)
          .hasMessageContaining("could not find expired runs")
          .hasMessageContaining("SQLSTATE 42P01")
          .hasMessageContaining("Retrying will not help");
    }
  }

  /**
   * A runs table made by hand (or by an older version) without the {@code missed} column: {@code
   * CREATE TABLE IF NOT EXISTS} leaves it alone, so without a check of its shape the first claim
   * would fail, at the first scheduled time, with a column error.
   */
  @Test
  void aRunsTableMissingAColumnIsRefusedWithTheDdlThatFits(PostgresSchema schema) {
    DSLContext db = schema.dsl();
    db.execute(
        "CREATE TABLE legacy_runs (job varchar(255) NOT NULL, scheduled_at timestamptz NOT NULL,"
            + " state varchar(16) NOT NULL, attempt bigint NOT NULL, owner varchar(255) NOT NULL,"
            + " locked_until timestamptz, covers_from timestamptz NOT NULL,"
            + " claimed_at timestamptz NOT NULL, finished_at timestamptz, last_error text,"
            + " PRIMARY KEY (job, scheduled_at))");
    String qualified = schema.schemaName() + ".legacy_runs";
    ScheduledSingleton instance =
        ScheduledSingleton.plain(
            schema.dataSource(),
            ScheduleConfig.custom("legacy", EVERY_MINUTE).table(qualified).build(),
            run -> {});
    List<String> before = columns(db, "legacy_runs");

    assertThatThrownBy(instance::createTableIfMissing)
        .isInstanceOfSatisfying(
            SchemaMismatchException.class,
            e -> {
              assertThat(e.table()).isEqualTo(qualified);
              assertThat(e.ddl()).isEqualTo(instance.ddl());
              assertThat(e.getMessage())
                  .contains(qualified)
                  .contains("column missed is missing")
                  .contains(instance.ddl().get(0))
                  .contains(instance.ddl().get(1));
            });
    assertThat(columns(db, "legacy_runs")).as("nothing was changed").isEqualTo(before);
    assertThat(indexes(db, "legacy_runs")).containsExactly("legacy_runs_pkey");
  }

  /**
   * Columns whose type the scheduler cannot use, and a table without the unique key its claim's
   * {@code ON CONFLICT (job, scheduled_at)} needs, are refused the same way.
   */
  @Test
  void aRunsTableWithAWrongTypeOrWithoutItsKeyIsRefused(PostgresSchema schema) {
    DSLContext db = schema.dsl();
    String columns =
        "job varchar(255) NOT NULL, scheduled_at %s NOT NULL, state varchar(16) NOT NULL,"
            + " attempt bigint NOT NULL, owner varchar(255) NOT NULL, locked_until timestamptz,"
            + " covers_from timestamptz NOT NULL, missed bigint NOT NULL,"
            + " claimed_at timestamptz NOT NULL, finished_at timestamptz, last_error text";
    db.execute(
        "CREATE TABLE local_time_runs ("
            + columns.formatted("timestamp")
            + ", PRIMARY KEY (job, scheduled_at))");
    db.execute("CREATE TABLE keyless_runs (" + columns.formatted("timestamptz") + ")");

    assertThatThrownBy(() -> create(schema, "local_time_runs"))
        .isInstanceOf(SchemaMismatchException.class)
        .hasMessageContaining(
            "column scheduled_at is timestamp without time zone, not timestamp with time zone");
    assertThatThrownBy(() -> create(schema, "keyless_runs"))
        .isInstanceOf(SchemaMismatchException.class)
        .hasMessageContaining("no unique key on (job, scheduled_at)");
  }

  /** A table of the right shape whose index is missing gets the index, and nothing else. */
  @Test
  void anExistingTableWithoutItsIndexGetsTheIndex(PostgresSchema schema) {
    DSLContext db = schema.dsl();
    String qualified = schema.schemaName() + ".bare_runs";
    ScheduledSingleton instance =
        ScheduledSingleton.plain(
            schema.dataSource(),
            ScheduleConfig.custom("bare", EVERY_MINUTE).table(qualified).build(),
            run -> {});
    db.execute(instance.ddl().get(0));
    db.execute(
        "INSERT INTO bare_runs VALUES ('kept', now(), 'done', 1, 'o', NULL, now(), 0,"
            + " now(), now(), NULL)");

    instance.createTableIfMissing();

    assertThat(indexes(db, "bare_runs"))
        .containsExactlyInAnyOrder("bare_runs_pkey", "bare_runs_expiry_idx");
    assertThat(new Runs(db, qualified).of("kept")).hasSize(1);
  }

  private static void create(PostgresSchema schema, String table) {
    ScheduledSingleton.plain(
            schema.dataSource(),
            ScheduleConfig.custom("shape", EVERY_MINUTE)
                .table(schema.schemaName() + "." + table)
                .build(),
            run -> {})
        .createTableIfMissing();
  }

  private static String readmeSchema() throws IOException {
    String readme = Files.readString(Path.of("README.md"));
    int section = readme.indexOf("## Schema");
    int start = readme.indexOf("```sql", section) + "```sql".length();
    return readme.substring(start, readme.indexOf("```", start));
  }

  private static List<String> columns(DSLContext db, String table) {
    return db.resultQuery(
            "SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' '"
                + " || coalesce(character_maximum_length::text, '-')"
                + " FROM information_schema.columns WHERE table_schema = current_schema()"
                + " AND table_name = ? ORDER BY ordinal_position",
            table)
        .fetch(0, String.class);
  }

  private static List<String> indexes(DSLContext db, String table) {
    return db.resultQuery(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
                + " AND tablename = ?",
            table)
        .fetch(0, String.class);
  }
}
