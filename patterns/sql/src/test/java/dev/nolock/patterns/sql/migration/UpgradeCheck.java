package dev.nolock.patterns.sql.migration;

import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import org.flywaydb.core.api.output.MigrateResult;

/**
 * Shows that a module's migrations after version 1 keep what is live in its tables: migrate to
 * version 1, let the module's API make live rows (a held lock, a running job, a key in progress),
 * migrate to the newest version with every migration found, and require every row with the values
 * it had, and the module's API still working with them.
 *
 * <p>Algorithm, in {@code schema}:
 *
 * <ol>
 *   <li>Flyway {@code migrate} with {@code target=1}: exactly version 1 applied.
 *   <li>{@link Live#create()}; then a {@link RowSnapshot} of the module's tables, which must hold
 *       at least one row (else the check would prove nothing).
 *   <li>Flyway {@code migrate} of every migration in the module's location and in {@code
 *       moreLocations} (none today past version 1; each later one when it is released).
 *   <li>{@link RowSnapshot#assertKeptIn}: no table, column or row lost or changed.
 *   <li>{@link Live#stillWorks()}: the module's own assertions on the live state.
 * </ol>
 */
public final class UpgradeCheck {

  /** What the module's API makes live before the upgrade and checks after it. */
  public interface Live {
    void create() throws Exception;

    void stillWorks() throws Exception;
  }

  private UpgradeCheck() {}

  /**
   * Runs the check; see the class Javadoc.
   *
   * @param moreLocations more Flyway locations searched for the later migrations (a test's)
   * @return the second migrate's result: which migrations ran after version 1
   * @throws AssertionError when the upgrade lost or changed a row, or the module's check failed
   */
  public static MigrateResult assertUpgradeKeepsLiveState(
      NolockMigrations module, MigrationSchema schema, Live live, String... moreLocations)
      throws Exception {
    MigrateResult first =
        module.flyway(schema.dataSource(), schema.name()).target("1").load().migrate();
    if (first.migrationsExecuted != 1 || !"1".equals(first.targetSchemaVersion)) {
      throw new AssertionError(
          "Migrating to version 1 ran " + first.migrationsExecuted + " migrations");
    }
    live.create();
    Set<String> history = Set.of(module.historyTable());
    RowSnapshot before = RowSnapshot.of(schema.dsl(), schema.name(), history);
    if (before.rowCount() == 0) {
      throw new AssertionError("Nothing live in " + schema + ": the upgrade check proves nothing");
    }
    List<String> locations = new ArrayList<>(List.of(module.location()));
    locations.addAll(List.of(moreLocations));
    MigrateResult upgrade =
        module
            .flyway(schema.dataSource(), schema.name())
            .locations(locations.toArray(String[]::new))
            .load()
            .migrate();
    before.assertKeptIn(schema.dsl());
    live.stillWorks();
    return upgrade;
  }
}
