package dev.nolock.architecture;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.sql.migration.NolockMigrations;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.io.File;
import java.io.IOException;
import java.net.JarURLConnection;
import java.net.URISyntaxException;
import java.net.URL;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Set;
import java.util.TreeSet;
import java.util.jar.JarFile;
import org.flywaydb.core.Flyway;
import org.flywaydb.core.api.MigrationInfo;
import org.flywaydb.core.api.MigrationState;
import org.flywaydb.core.api.output.MigrateResult;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Every module's shipped migrations run into one schema side by side, each module with its own
 * history table, as an application that uses them all would run them; and every folder shipped
 * under {@code nolock/migration} is one of them.
 *
 * <p>Flyway refuses to start a history table in a schema that already holds tables ("Found
 * non-empty schema(s) ... but no schema history table"): every module after the first, and every
 * module in an application's own schema, needs {@code baselineOnMigrate=true} with {@code
 * baselineVersion=0}, a baseline below V1, so that V1 still runs.
 */
@ExtendWith(PostgresExtension.class)
class AllMigrationsIT {

  private static final String ROOT = "nolock/migration";

  @Test
  void everyModuleMigratesIntoOneSchemaWithItsOwnHistory(PostgresSchema pg) {
    for (NolockMigrations module : NolockMigrations.values()) {
      MigrateResult result =
          module
              .flyway(pg.dataSource(), pg.schemaName())
              .baselineOnMigrate(true)
              .baselineVersion("0")
              .load()
              .migrate();
      assertThat(result.migrationsExecuted)
          .as(module.location())
          .isEqualTo(module == NolockMigrations.LOCK ? 2 : 1);
    }

    for (NolockMigrations module : NolockMigrations.values()) {
      MigrationInfo[] applied =
          module.flyway(pg.dataSource(), pg.schemaName()).load().info().applied();
      MigrationInfo last = applied[applied.length - 1];
      String latest = module == NolockMigrations.LOCK ? "2" : "1";
      assertThat(last.getVersion().getVersion()).as(module.historyTable()).isEqualTo(latest);
      assertThat(last.getState()).isEqualTo(MigrationState.SUCCESS);
      assertThat(last.getScript()).startsWith("V" + latest + "__");
    }
    assertThat(
            pg.dsl()
                .fetch(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                        + " AND tablename NOT LIKE '%\\_schema\\_history'")
                .getValues(0, String.class))
        .containsExactlyInAnyOrder(
            "nolock_fences",
            "nolock_fences_writes",
            "nolock_locks",
            "nolock_locks_waiters",
            "nolock_jobs",
            "nolock_idempotency_keys",
            "nolock_scheduled_runs",
            "nolock_partition_owners");
  }

  /** A module that ships migrations must be in {@link NolockMigrations}, and so in this test. */
  @Test
  void everyShippedMigrationFolderIsKnown() throws IOException, URISyntaxException {
    Set<String> shipped = new TreeSet<>();
    for (URL url : Collections.list(getClass().getClassLoader().getResources(ROOT))) {
      if (url.getProtocol().equals("jar")) {
        JarURLConnection connection = (JarURLConnection) url.openConnection();
        connection.setUseCaches(false);
        try (JarFile jar = connection.getJarFile()) {
          jar.stream()
              .map(e -> e.getName())
              .filter(n -> n.startsWith(ROOT + "/") && n.endsWith(".sql"))
              .forEach(n -> shipped.add(n.substring(ROOT.length() + 1, n.lastIndexOf('/'))));
        }
      } else {
        File[] folders = new File(url.toURI()).listFiles(File::isDirectory);
        Arrays.stream(folders).forEach(f -> shipped.add(f.getName()));
      }
    }
    Set<String> known = new TreeSet<>();
    for (NolockMigrations module : NolockMigrations.values()) {
      known.add(module.location().substring(("classpath:" + ROOT + "/").length()));
    }
    assertThat(shipped).isEqualTo(known);
  }

  /**
   * An application's own Flyway on its default location ({@code classpath:db/migration}, Spring
   * Boot's too) scans recursively, with every nolock jar on the classpath: it must find none of
   * nolock's files, or it takes them for its own and refuses two {@code V1} files. The same scan
   * over nolock's root is that failure (so the scan does see the jars): what every application with
   * Flyway met while the files sat under {@code db/migration/nolock}.
   */
  @Test
  void anApplicationsFlywayOnItsDefaultLocationFindsNoneOfNolocksFiles(PostgresSchema pg) {
    assertThat(scripts(pg, "classpath:db/migration")).isEmpty();
    assertThatThrownBy(() -> scripts(pg, "classpath:" + ROOT))
        .hasMessageContaining("Found more than one migration with version 1");
  }

  private static List<String> scripts(PostgresSchema pg, String location) {
    return Arrays.stream(
            Flyway.configure()
                .dataSource(pg.dataSource())
                .schemas(pg.schemaName())
                .locations(location)
                .table("flyway_scan_only")
                .load()
                .info()
                .all())
        .map(MigrationInfo::getScript)
        .toList();
  }
}
