package dev.nolock.patterns.sql.migration;

import java.util.LinkedHashMap;
import java.util.Map;
import javax.sql.DataSource;
import org.flywaydb.core.Flyway;
import org.flywaydb.core.api.configuration.FluentConfiguration;

/**
 * The shipped migrations of each module with PostgreSQL tables, as a user points Flyway at them:
 * {@code classpath:nolock/migration/<name>}, history table {@code nolock_<name>_schema_history},
 * and one placeholder per table name with the module's default name as its value. The files are on
 * the classpath of the module that ships them (and of anything that depends on it), not necessarily
 * here.
 */
public enum NolockMigrations {
  FENCE(
      "fence",
      "nolock_fence_table",
      "nolock_fences",
      "nolock_fence_writes_table",
      "nolock_fences_writes"),
  LOCK("lock", "nolock_lock_table", "nolock_locks"),
  QUEUE("queue", "nolock_queue_table", "nolock_jobs"),
  IDEMPOTENCY("idempotency", "nolock_idempotency_table", "nolock_idempotency_keys"),
  SCHEDULE("schedule", "nolock_schedule_table", "nolock_scheduled_runs"),
  OWNERSHIP("ownership", "nolock_ownership_table", "nolock_partition_owners");

  private final String name;
  private final Map<String, String> placeholders;

  NolockMigrations(String name, String... placeholderAndDefault) {
    this.name = name;
    Map<String, String> map = new LinkedHashMap<>();
    for (int i = 0; i < placeholderAndDefault.length; i += 2) {
      map.put(placeholderAndDefault[i], placeholderAndDefault[i + 1]);
    }
    this.placeholders = Map.copyOf(map);
  }

  /** {@code classpath:nolock/migration/<name>}. */
  public String location() {
    return "classpath:nolock/migration/" + name;
  }

  /** {@code nolock_<name>_schema_history}: each module keeps its own history. */
  public String historyTable() {
    return "nolock_" + name + "_schema_history";
  }

  /** Each table-name placeholder with the module's default table name. */
  public Map<String, String> placeholders() {
    return placeholders;
  }

  /**
   * Flyway on {@code dataSource} for this module's files in {@code schema} (which must exist), its
   * own history table, the default table names, and {@code clean} disabled; callers add {@code
   * target}, {@code baselineOnMigrate} or more locations.
   */
  public FluentConfiguration flyway(DataSource dataSource, String schema) {
    return Flyway.configure()
        .dataSource(dataSource)
        .schemas(schema)
        .defaultSchema(schema)
        .createSchemas(false)
        .table(historyTable())
        .locations(location())
        .placeholders(placeholders)
        .cleanDisabled(true);
  }
}
