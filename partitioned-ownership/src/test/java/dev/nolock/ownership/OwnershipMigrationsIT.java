package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.name;

import dev.nolock.ownership.internal.OwnerTable;
import dev.nolock.ownership.internal.Safeguards;
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
 * The ownership table's shipped migrations ({@code nolock/migration/ownership}): the schema they
 * make is the one {@link PartitionOwner#createTableIfMissing} makes (through {@link OwnerTable},
 * the code it runs), they adopt a table it made, and a later migration must keep each partition's
 * owner, epoch and applied offset.
 */
@ExtendWith(PostgresExtension.class)
class OwnershipMigrationsIT {

  private static final NolockMigrations OWNERSHIP = NolockMigrations.OWNERSHIP;
  private static final Duration TIMEOUT = Duration.ofSeconds(5);
  private static final OwnerTable OWNERS = new OwnerTable(name(OwnershipConfig.DEFAULT_TABLE));

  @Test
  void theMigrationsMakeWhatCreateTableIfMissingMakes(PostgresSchema pg) throws Exception {
    MigrationChecks.makeWhatCreateTableIfMissingMakes(
        OWNERSHIP, pg, schema -> OWNERS.createTableIfMissing(schema.dsl(), TIMEOUT));
  }

  @Test
  void theMigrationsAdoptATableCreateTableIfMissingMade(PostgresSchema pg) throws Exception {
    MigrationChecks.adoptWhatCreateTableIfMissingMade(
        OWNERSHIP, pg, schema -> OWNERS.createTableIfMissing(schema.dsl(), TIMEOUT));
  }

  /**
   * Live: partition 0 owned by "a" at its epoch with offset 41 applied. After the upgrade a write
   * under an older epoch is refused, the owner applies on, and the next claim takes over from the
   * applied offset.
   */
  @Test
  void laterMigrationsKeepOwnersEpochsAndOffsets(PostgresSchema pg) throws Exception {
    try (MigrationSchema schema = MigrationSchema.fresh(pg)) {
      DSLContext dsl = schema.dsl();
      long[] epoch = new long[1];
      UpgradeCheck.assertUpgradeKeepsLiveState(
          OWNERSHIP,
          schema,
          new UpgradeCheck.Live() {
            @Override
            public void create() {
              OWNERS.register(dsl, "g", "t", 2, TIMEOUT);
              epoch[0] = OWNERS.claim(dsl, "g", "t", 0, 2, "a", TIMEOUT, 0L).epoch();
              assertThat(advance(dsl, 41, epoch[0], "a")).isEqualTo(1);
            }

            @Override
            public void stillWorks() {
              assertThat(advance(dsl, 42, epoch[0] - 1, "a"))
                  .as("an older epoch is still refused")
                  .isZero();
              assertThat(advance(dsl, 42, epoch[0], "a")).isEqualTo(1);
              OwnerTable.Claim next = OWNERS.claim(dsl, "g", "t", 0, 2, "b", TIMEOUT, null);
              assertThat(next.epoch()).isEqualTo(epoch[0] + 1);
              assertThat(next.lastApplied()).isEqualTo(42);
            }
          });
    }
  }

  private static int advance(DSLContext dsl, long offset, long epoch, String owner) {
    return dsl.transactionResult(
        cfg ->
            OWNERS.advance(
                cfg.dsl(), "g", "t", 0, offset, epoch, owner, Safeguards.ALL, TIMEOUT, TIMEOUT));
  }
}
