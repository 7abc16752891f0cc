package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencedWrite;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.patterns.WriteId;
import dev.nolock.patterns.sql.migration.MigrationChecks;
import dev.nolock.patterns.sql.migration.MigrationSchema;
import dev.nolock.patterns.sql.migration.NolockMigrations;
import dev.nolock.patterns.sql.migration.UpgradeCheck;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import org.jooq.DSLContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The fence's shipped migrations ({@code nolock/migration/fence}): the schema they make is the one
 * {@link Fence#createTableIfMissing} makes, they adopt tables it made, and a later migration must
 * keep the fence rows and write ids that are live.
 */
@ExtendWith(PostgresExtension.class)
class FenceMigrationsIT {

  private static final NolockMigrations FENCE = NolockMigrations.FENCE;

  private final Fence fence = Fence.onTable(Fence.DEFAULT_TABLE);

  @Test
  void theMigrationsMakeWhatCreateTableIfMissingMakes(PostgresSchema pg) throws Exception {
    MigrationChecks.makeWhatCreateTableIfMissingMakes(
        FENCE, pg, schema -> fence.createTableIfMissing(schema.dsl()));
  }

  @Test
  void theMigrationsAdoptTablesCreateTableIfMissingMade(PostgresSchema pg) throws Exception {
    MigrationChecks.adoptWhatCreateTableIfMissingMade(
        FENCE, pg, schema -> fence.createTableIfMissing(schema.dsl()));
  }

  @Test
  void laterMigrationsKeepTheLiveFenceAndItsWriteIds(PostgresSchema pg) throws Exception {
    try (MigrationSchema schema = MigrationSchema.fresh(pg)) {
      UpgradeCheck.assertUpgradeKeepsLiveState(FENCE, schema, live(schema.dsl()));
    }
  }

  /** The negative control: a later migration that forgets the write ids is caught. */
  @Test
  void aLaterMigrationThatLosesWriteIdsIsCaught(PostgresSchema pg) {
    try (MigrationSchema schema = MigrationSchema.fresh(pg)) {
      assertThatThrownBy(
              () ->
                  UpgradeCheck.assertUpgradeKeepsLiveState(
                      FENCE,
                      schema,
                      live(schema.dsl()),
                      "classpath:db/test-migration/nolock/fence-destructive"))
          .isInstanceOf(AssertionError.class)
          .hasMessageContaining("The upgrade lost or changed live rows")
          .hasMessageContaining("table nolock_fences_writes rows changed");
    }
  }

  /** Live: the fence at token 5 with the write id "w-5" recorded under it. */
  private UpgradeCheck.Live live(DSLContext dsl) {
    return new UpgradeCheck.Live() {
      @Override
      public void create() {
        assertThat(fence.write(dsl, lease(5), WriteId.of("w-5"), tx -> "written").get())
            .isInstanceOf(FencedWrite.Applied.class);
      }

      @Override
      public void stillWorks() {
        assertThat(fence.write(dsl, lease(4), tx -> "stale").isLeft())
            .as("the fence still refuses an older token")
            .isTrue();
        assertThat(fence.write(dsl, lease(5), WriteId.of("w-5"), tx -> "again").get())
            .as("the recorded write id is still recognised")
            .isInstanceOf(FencedWrite.AlreadyWritten.class);
        assertThat(fence.write(dsl, lease(6), tx -> "newer").get()).isEqualTo("newer");
      }
    };
  }

  private static Lease lease(long token) {
    return new Lease(
        "ledger",
        "owner-" + token,
        FencingToken.of(token),
        Deadline.forHolder(new ManualLeaseClock(), 0, Duration.ofSeconds(10)));
  }
}
