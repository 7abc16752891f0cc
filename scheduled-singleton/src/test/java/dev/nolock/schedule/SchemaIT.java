package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;

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
