package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.UUID;
import org.jooq.DSLContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The DDL in the README's "Schema" section builds exactly what createTableIfMissing builds. */
@ExtendWith(PostgresExtension.class)
class SchemaReadmeIT {

  @Test
  void theReadmeSchemaAndCreateTableIfMissingAgree(PostgresSchema schema) throws Exception {
    String readme = Files.readString(Path.of("README.md"));
    int section = readme.indexOf("## Schema");
    int start = readme.indexOf("```sql\n", section) + "```sql\n".length();
    String ddl = readme.substring(start, readme.indexOf("```", start));

    DSLContext dsl = schema.dsl();
    String other = "readme_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12);
    dsl.execute("CREATE SCHEMA " + other);
    try {
      dsl.transaction(
          cfg -> {
            cfg.dsl().execute("SET LOCAL search_path TO " + other);
            cfg.dsl().execute(ddl);
          });
      JobQueue.create(schema.dataSource(), QueueConfig.ofDefaults("q"), PayloadCodec.utf8())
          .createTableIfMissing();

      assertThat(columns(dsl, other)).isEqualTo(columns(dsl, schema.schemaName())).hasSize(13);
      assertThat(constraints(dsl, other))
          .isEqualTo(constraints(dsl, schema.schemaName()))
          .hasSize(5);
      assertThat(indexes(dsl, other)).isEqualTo(indexes(dsl, schema.schemaName())).hasSize(6);
    } finally {
      dsl.execute("DROP SCHEMA " + other + " CASCADE");
    }
  }

  private static List<String> columns(DSLContext dsl, String schemaName) {
    return dsl.fetch(
            "SELECT column_name || ' ' || data_type || ' ' || is_nullable || ' '"
                + " || coalesce(column_default, '-') || ' ' || is_identity"
                + " FROM information_schema.columns WHERE table_schema = ?"
                + " AND table_name = 'nolock_jobs' ORDER BY ordinal_position",
            schemaName)
        .getValues(0, String.class);
  }

  private static List<String> constraints(DSLContext dsl, String schemaName) {
    return dsl.fetch(
            "SELECT pg_get_constraintdef(c.oid) FROM pg_constraint c"
                + " JOIN pg_class t ON t.oid = c.conrelid"
                + " JOIN pg_namespace n ON n.oid = t.relnamespace"
                + " WHERE n.nspname = ? AND t.relname = 'nolock_jobs' ORDER BY 1",
            schemaName)
        .getValues(0, String.class);
  }

  private static List<String> indexes(DSLContext dsl, String schemaName) {
    return dsl.fetch(
            "SELECT replace(indexdef, ? || '.', '') FROM pg_indexes"
                + " WHERE schemaname = ? AND tablename = 'nolock_jobs' ORDER BY 1",
            schemaName,
            schemaName)
        .getValues(0, String.class);
  }
}
