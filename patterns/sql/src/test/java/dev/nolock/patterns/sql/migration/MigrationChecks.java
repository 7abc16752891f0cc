package dev.nolock.patterns.sql.migration;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.PostgresSchema;
import java.util.Set;
import org.flywaydb.core.api.CoreMigrationType;
import org.flywaydb.core.api.MigrationInfo;
import org.flywaydb.core.api.output.MigrateResult;

/**
 * The two checks every module's shipped migrations pass, each in fresh schemas beside the test
 * class's own: they make exactly what the module's {@code createTableIfMissing} makes, and they
 * adopt (baseline at version 1, running nothing) a table it made.
 */
public final class MigrationChecks {

  /** The module's {@code createTableIfMissing}, run in {@code schema}. */
  @FunctionalInterface
  public interface Creator {
    void createIn(MigrationSchema schema) throws Exception;
  }

  private MigrationChecks() {}

  /** The migrations in one fresh schema make what {@code create} makes in another. */
  public static void makeWhatCreateTableIfMissingMakes(
      NolockMigrations module, PostgresSchema pg, Creator create) throws Exception {
    try (MigrationSchema made = MigrationSchema.fresh(pg);
        MigrationSchema migrated = MigrationSchema.fresh(pg)) {
      create.createIn(made);
      module.flyway(migrated.dataSource(), migrated.name()).load().migrate();

      SchemaSnapshot.assertSameShape(
          SchemaSnapshot.of(pg.dsl(), made.name(), Set.of()),
          SchemaSnapshot.of(pg.dsl(), migrated.name(), Set.of(module.historyTable())));
    }
  }

  /**
   * A schema that {@code create} made is adopted by a baseline at the latest shipped version: no
   * migration runs, the history holds the baseline alone, and the schema is unchanged but for the
   * history table.
   */
  public static void adoptWhatCreateTableIfMissingMade(
      NolockMigrations module, PostgresSchema pg, Creator create) throws Exception {
    try (MigrationSchema schema = MigrationSchema.fresh(pg)) {
      create.createIn(schema);
      SchemaSnapshot made = SchemaSnapshot.of(pg.dsl(), schema.name(), Set.of());

      // What createTableIfMissing makes is the latest shipped version, recorded without running.
      MigrationInfo[] shipped =
          module.flyway(schema.dataSource(), schema.name()).load().info().all();
      String latest = shipped[shipped.length - 1].getVersion().getVersion();
      MigrateResult adopted =
          module
              .flyway(schema.dataSource(), schema.name())
              .baselineOnMigrate(true)
              .baselineVersion(latest)
              .load()
              .migrate();

      assertThat(adopted.migrationsExecuted).isZero();
      MigrationInfo[] history =
          module.flyway(schema.dataSource(), schema.name()).load().info().applied();
      assertThat(history).hasSize(1);
      assertThat(history[0].getType()).isEqualTo(CoreMigrationType.BASELINE);
      assertThat(history[0].getVersion().getVersion()).isEqualTo(latest);
      SchemaSnapshot.assertSameShape(
          made, SchemaSnapshot.of(pg.dsl(), schema.name(), Set.of(module.historyTable())));
    }
  }
}
