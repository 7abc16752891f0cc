package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.sql.migration.MigrationChecks;
import dev.nolock.patterns.sql.migration.MigrationSchema;
import dev.nolock.patterns.sql.migration.NolockMigrations;
import dev.nolock.patterns.sql.migration.UpgradeCheck;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The keys table's shipped migrations ({@code nolock/migration/idempotency}): the schema they make
 * is the one {@link IdempotencyKeys#createTableIfMissing} makes (the attempt-token sequence
 * included), they adopt a table it made, and a later migration must keep completed keys and keys in
 * progress.
 */
@ExtendWith(PostgresExtension.class)
class IdempotencyMigrationsIT {

  private static final NolockMigrations IDEMPOTENCY = NolockMigrations.IDEMPOTENCY;
  private static final String SCOPE = "payments.create";
  private static final Fingerprint REQUEST = Fingerprint.of("request-1");

  @Test
  void theMigrationsMakeWhatCreateTableIfMissingMakes(PostgresSchema pg) throws Exception {
    MigrationChecks.makeWhatCreateTableIfMissingMakes(
        IDEMPOTENCY, pg, schema -> keys(schema.dataSource()).createTableIfMissing());
  }

  @Test
  void theMigrationsAdoptATableCreateTableIfMissingMade(PostgresSchema pg) throws Exception {
    MigrationChecks.adoptWhatCreateTableIfMissingMade(
        IDEMPOTENCY, pg, schema -> keys(schema.dataSource()).createTableIfMissing());
  }

  /**
   * Live: a completed key, and a key in progress whose first phase committed and whose last phase
   * failed. After the upgrade the completed key replays its result, and the key in progress resumes
   * after its first phase without running it again.
   */
  @Test
  void laterMigrationsKeepCompletedAndInProgressKeys(PostgresSchema pg) throws Exception {
    try (MigrationSchema schema = MigrationSchema.fresh(pg)) {
      IdempotencyKeys<String> keys = keys(schema.dataSource());
      AtomicInteger charges = new AtomicInteger();
      AtomicInteger finishes = new AtomicInteger();
      Phases<String, RuntimeException> payment =
          Phases.builder()
              .phase("charged", attempt -> charges.incrementAndGet())
              .finish(
                  attempt -> {
                    if (finishes.incrementAndGet() == 1) {
                      throw new IllegalStateException("the receipt service is down");
                    }
                    return "paid";
                  });
      UpgradeCheck.assertUpgradeKeepsLiveState(
          IDEMPOTENCY,
          schema,
          new UpgradeCheck.Live() {
            @Override
            public void create() {
              assertThat(keys.execute(SCOPE, Caller.of("alice"), "k-done", REQUEST, a -> "done"))
                  .isInstanceOf(Outcome.Completed.class);
              assertThatThrownBy(
                      () -> keys.execute(SCOPE, Caller.of("alice"), "k-open", REQUEST, payment))
                  .hasMessageContaining("the receipt service is down");
            }

            @Override
            public void stillWorks() {
              assertThat(keys.execute(SCOPE, Caller.of("alice"), "k-done", REQUEST, a -> "again"))
                  .isEqualTo(new Outcome.Replayed<>("done"));
              assertThat(keys.execute(SCOPE, Caller.of("alice"), "k-open", REQUEST, payment))
                  .isInstanceOf(Outcome.Completed.class);
              assertThat(charges).as("the committed phase did not run again").hasValue(1);
            }
          });
    }
  }

  /**
   * The negative control: a later migration that keeps every row but restarts the attempt-token
   * sequence (tokens would be handed out twice, and a takeover could not fence the attempt it
   * replaced) is caught.
   */
  @Test
  void aLaterMigrationThatRestartsTheAttemptTokensIsCaught(PostgresSchema pg) {
    try (MigrationSchema schema = MigrationSchema.fresh(pg)) {
      IdempotencyKeys<String> keys = keys(schema.dataSource());
      assertThatThrownBy(
              () ->
                  UpgradeCheck.assertUpgradeKeepsLiveState(
                      IDEMPOTENCY,
                      schema,
                      new UpgradeCheck.Live() {
                        @Override
                        public void create() {
                          keys.execute(SCOPE, Caller.of("alice"), "k-done", REQUEST, a -> "done");
                        }

                        @Override
                        public void stillWorks() {}
                      },
                      "classpath:db/test-migration/nolock/idempotency-token-reset"))
          .isInstanceOf(AssertionError.class)
          .hasMessageContaining("sequence nolock_idempotency_keys_attempt_seq was at");
    }
  }

  private static IdempotencyKeys<String> keys(DataSource dataSource) {
    return IdempotencyKeys.create(dataSource, IdempotencyConfig.ofDefaults(), ResultCodec.utf8());
  }
}
