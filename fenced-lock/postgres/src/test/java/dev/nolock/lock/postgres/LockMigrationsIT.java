package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.sql.migration.MigrationChecks;
import dev.nolock.patterns.sql.migration.MigrationSchema;
import dev.nolock.patterns.sql.migration.NolockMigrations;
import dev.nolock.patterns.sql.migration.UpgradeCheck;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The lock table's shipped migrations ({@code nolock/migration/lock}): the schema they make is the
 * one {@link PostgresLockBackend#createTableIfMissing} makes, they adopt a table it made, and a
 * later migration must keep a held lock held.
 */
@ExtendWith(PostgresExtension.class)
class LockMigrationsIT {

  private static final NolockMigrations LOCK = NolockMigrations.LOCK;
  private static final Duration HOUR = Duration.ofHours(1);

  @Test
  void theMigrationsMakeWhatCreateTableIfMissingMakes(PostgresSchema pg) throws Exception {
    MigrationChecks.makeWhatCreateTableIfMissingMakes(
        LOCK, pg, schema -> PostgresLockBackend.create(schema.dataSource()).createTableIfMissing());
  }

  @Test
  void theMigrationsAdoptATableCreateTableIfMissingMade(PostgresSchema pg) throws Exception {
    MigrationChecks.adoptWhatCreateTableIfMissingMade(
        LOCK, pg, schema -> PostgresLockBackend.create(schema.dataSource()).createTableIfMissing());
  }

  @Test
  void laterMigrationsKeepAHeldLockHeld(PostgresSchema pg) throws Exception {
    try (MigrationSchema schema = MigrationSchema.fresh(pg)) {
      UpgradeCheck.assertUpgradeKeepsLiveState(
          LOCK, schema, live(PostgresLockBackend.create(schema.dataSource())));
    }
  }

  /**
   * The negative control: a later migration that keeps every row but drops the key the acquire's
   * {@code ON CONFLICT} needs is caught by the module's own check.
   */
  @Test
  void aLaterMigrationThatBreaksTheAcquireIsCaught(PostgresSchema pg) {
    try (MigrationSchema schema = MigrationSchema.fresh(pg)) {
      assertThatThrownBy(
              () ->
                  UpgradeCheck.assertUpgradeKeepsLiveState(
                      LOCK,
                      schema,
                      live(PostgresLockBackend.create(schema.dataSource())),
                      "classpath:db/test-migration/nolock/lock-without-key"))
          .isInstanceOf(IllegalStateException.class)
          .hasMessageContaining("ON CONFLICT");
    }
  }

  /** Live: the lock "report" held by "a" for an hour. */
  private static UpgradeCheck.Live live(PostgresLockBackend backend) {
    FencingToken[] held = new FencingToken[1];
    return new UpgradeCheck.Live() {
      @Override
      public void create() {
        held[0] = backend.tryAcquire("report", "a", HOUR).get();
      }

      @Override
      public void stillWorks() {
        assertThat(backend.tryAcquire("report", "b", HOUR).isEmpty())
            .as("the held lock still refuses a second acquirer")
            .isTrue();
        assertThat(backend.renew("report", "a", held[0], HOUR)).isTrue();
        assertThat(backend.release("report", "a", held[0])).isTrue();
        assertThat(backend.tryAcquire("report", "b", HOUR).get().value())
            .as("the next grant's token is above the one held across the upgrade")
            .isGreaterThan(held[0].value());
      }
    };
  }
}
