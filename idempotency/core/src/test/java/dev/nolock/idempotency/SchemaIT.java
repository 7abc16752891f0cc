package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.SchemaMismatchException;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import org.jooq.DSLContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(PostgresExtension.class)
class SchemaIT {

  /**
   * A keys table that exists without a column the library writes is refused by {@code
   * createTableIfMissing()} with the DDL that fits; nothing is altered. Before, the call created
   * the sequence and went on to the indexes, and failed on the partial index with an
   * IllegalStateException carrying PostgreSQL's "column state does not exist" (or, with the indexes
   * already there, succeeded and left the first execute to fail).
   */
  @Test
  void aTableWithoutAColumnTheLibraryWritesIsRefusedWithTheDdlThatFits(PostgresSchema pg) {
    pg.dsl()
        .execute(
            "CREATE TABLE short_keys (scope varchar(200) NOT NULL,"
                + " idempotency_key varchar(255) NOT NULL, fingerprint varchar(64) NOT NULL,"
                + " PRIMARY KEY (scope, idempotency_key))");
    IdempotencyKeys<String> keys =
        IdempotencyKeys.create(
            pg.dataSource(),
            IdempotencyConfig.custom().table("short_keys").build(),
            ResultCodec.utf8());

    assertThatThrownBy(keys::createTableIfMissing)
        .isInstanceOfSatisfying(
            SchemaMismatchException.class,
            e -> {
              assertThat(e.table()).isEqualTo("short_keys");
              assertThat(e.problem())
                  .contains("column state is missing")
                  .contains("column expires_at is missing");
              assertThat(String.join("\n", e.ddl()))
                  .contains("create table if not exists")
                  .contains("state");
            })
        .hasMessageContaining("short_keys");
  }

  /** Every column of the README's table; {@code %s} is the type of its four timestamps. */
  private static final String COLUMNS =
      "scope varchar(100) NOT NULL, principal text NOT NULL, idempotency_key varchar(255) NOT NULL,"
          + " fingerprint varchar(255) NOT NULL, state varchar(16) NOT NULL,"
          + " attempt_token bigint NOT NULL, attempt_count int NOT NULL,"
          + " recovery_point varchar(63) NOT NULL, locked_until %1$s NOT NULL,"
          + " response_status int, response_body bytea, created_at %1$s NOT NULL,"
          + " completed_at %1$s, expires_at %1$s NOT NULL, downstream_key uuid NOT NULL";

  /** The columns of the shape before callers: no principal, no downstream key. */
  private static final String COLUMNS_BEFORE_CALLERS =
      COLUMNS
          .replace(" principal text NOT NULL,", "")
          .replace(", downstream_key uuid NOT NULL", "");

  /**
   * A keys table whose lease and expiry are {@code timestamp} (without time zone) is refused: each
   * session converts {@code clock_timestamp()} through its own TimeZone (pgjdbc sets it from the
   * JVM), so an instance in UTC would read a lease written from America/New_York as 5 h expired and
   * run the action a second time ({@code TimeZoneIT}'s negative control). Before, the call only
   * checked the column names and accepted the table.
   */
  @Test
  void aTableWhoseTimestampsCarryNoTimeZoneIsRefused(PostgresSchema pg) {
    pg.dsl()
        .execute(
            "CREATE TABLE local_time_keys ("
                + COLUMNS.formatted("timestamp")
                + ", PRIMARY KEY (scope, principal, idempotency_key))");

    assertThatThrownBy(() -> keys(pg, "local_time_keys").createTableIfMissing())
        .isInstanceOfSatisfying(
            SchemaMismatchException.class,
            e -> {
              assertThat(e.table()).isEqualTo("local_time_keys");
              assertThat(e.problem())
                  .contains(
                      "column locked_until is timestamp without time zone, not timestamp with"
                          + " time zone")
                  .contains("column expires_at is timestamp without time zone");
              assertThat(String.join("\n", e.ddl())).contains("timestamp with time zone");
            });
    assertThat(indexes(pg.dsl(), "local_time_keys"))
        .as("nothing was created on the refused table")
        .containsExactly("local_time_keys_pkey");
  }

  /**
   * A keys table without its primary key on {@code (scope, principal, idempotency_key)}, or with
   * one on other columns, is refused: the claim's {@code ON CONFLICT (scope, principal,
   * idempotency_key)} needs it, and it is what lets one request per key and caller through.
   */
  @Test
  void aTableWithoutItsPrimaryKeyOrWithAnotherOneIsRefused(PostgresSchema pg) {
    pg.dsl().execute("CREATE TABLE keyless_keys (" + COLUMNS.formatted("timestamptz") + ")");
    pg.dsl()
        .execute(
            "CREATE TABLE key_only_keys ("
                + COLUMNS.formatted("timestamptz")
                + ", PRIMARY KEY (idempotency_key))");

    for (String table : new String[] {"keyless_keys", "key_only_keys"}) {
      assertThatThrownBy(() -> keys(pg, table).createTableIfMissing())
          .as(table)
          .isInstanceOfSatisfying(
              SchemaMismatchException.class,
              e ->
                  assertThat(e.problem())
                      .startsWith("no unique key on (scope, principal, idempotency_key)"));
    }
  }

  /**
   * A keys table of the shape before keys belonged to their caller (no {@code principal} and no
   * {@code downstream_key}, the primary key on {@code (scope, idempotency_key)}) is refused: on it
   * two callers would share one key space. So is one that has the two columns but keeps the old
   * primary key. Before, the first was accepted.
   */
  @Test
  void aTableOfTheShapeBeforeCallersIsRefused(PostgresSchema pg) {
    pg.dsl()
        .execute(
            "CREATE TABLE shared_keys ("
                + COLUMNS_BEFORE_CALLERS.formatted("timestamptz")
                + ", PRIMARY KEY (scope, idempotency_key))");
    pg.dsl()
        .execute(
            "CREATE TABLE half_migrated_keys ("
                + COLUMNS_BEFORE_CALLERS.formatted("timestamptz")
                + ", principal text NOT NULL DEFAULT '', downstream_key uuid NOT NULL"
                + " DEFAULT gen_random_uuid(), PRIMARY KEY (scope, idempotency_key))");

    assertThatThrownBy(() -> keys(pg, "shared_keys").createTableIfMissing())
        .isInstanceOfSatisfying(
            SchemaMismatchException.class,
            e -> {
              assertThat(e.problem())
                  .contains("column principal is missing")
                  .contains("column downstream_key is missing")
                  .contains("no unique key on (scope, principal, idempotency_key)");
              assertThat(String.join("\n", e.ddl()))
                  .contains("primary key (\"scope\", \"principal\", \"idempotency_key\")");
            });
    assertThatThrownBy(() -> keys(pg, "half_migrated_keys").createTableIfMissing())
        .isInstanceOfSatisfying(
            SchemaMismatchException.class,
            e ->
                assertThat(e.problem())
                    .isEqualTo(
                        "no unique key on (scope, principal, idempotency_key); unique constraint"
                            + " half_migrated_keys_pkey on (scope, idempotency_key) is on fewer"
                            + " columns than the key (scope, principal, idempotency_key), so it"
                            + " refuses rows the key keeps apart; drop it: ALTER TABLE"
                            + " half_migrated_keys DROP CONSTRAINT half_migrated_keys_pkey"));
    assertThat(indexes(pg.dsl(), "shared_keys"))
        .as("nothing was created on the refused table")
        .containsExactly("shared_keys_pkey");
  }

  /**
   * A table migrated halfway, the old primary key on {@code (scope, idempotency_key)} kept beside a
   * new unique index on {@code (scope, principal, idempotency_key)}, is refused with the statement
   * that drops the old key: on it a second caller sending the first one's key would fail the claim
   * with a unique violation (a 500, a lockout, and a sign that the key exists). Before, it was
   * accepted, and that claim failed.
   */
  @Test
  void aTableThatKeepsTheOldKeyBesideTheNewOneIsRefused(PostgresSchema pg) {
    pg.dsl()
        .execute(
            "CREATE TABLE both_keys ("
                + COLUMNS.formatted("timestamptz")
                + ", PRIMARY KEY (scope, idempotency_key))");
    pg.dsl()
        .execute(
            "CREATE UNIQUE INDEX both_keys_caller ON both_keys (scope, principal,"
                + " idempotency_key)");

    assertThatThrownBy(() -> keys(pg, "both_keys").createTableIfMissing())
        .isInstanceOfSatisfying(
            SchemaMismatchException.class,
            e ->
                assertThat(e.problem())
                    .isEqualTo(
                        "unique constraint both_keys_pkey on (scope, idempotency_key) is on fewer"
                            + " columns than the key (scope, principal, idempotency_key), so it"
                            + " refuses rows the key keeps apart; drop it: ALTER TABLE both_keys"
                            + " DROP CONSTRAINT both_keys_pkey"));
    pg.dsl().execute("ALTER TABLE both_keys DROP CONSTRAINT both_keys_pkey");
    IdempotencyKeys<String> keys = keys(pg, "both_keys");
    keys.createTableIfMissing();
    assertThat(keys.execute("s", Caller.of("alice"), "k", Fingerprint.of("f"), a -> "a"))
        .isInstanceOf(Outcome.Completed.class);
    assertThat(keys.execute("s", Caller.of("bob"), "k", Fingerprint.of("f"), a -> "b"))
        .as("the other caller's claim on the same key, once the old key is dropped")
        .isInstanceOf(Outcome.Completed.class);
  }

  /**
   * The README's migration turns a table of the shape before callers into one the call accepts;
   * every row survives as an anonymous-caller row with a downstream key of its own; a key completed
   * before it replays for the anonymous caller only, a principal sending the same key gets a run of
   * its own, and a key in progress past a phase resumes after that phase.
   */
  @Test
  void theReadmesMigrationMakesOldRowsAnonymousCallerRows(PostgresSchema pg) {
    pg.dsl()
        .execute(
            "CREATE TABLE old_keys ("
                + COLUMNS_BEFORE_CALLERS.formatted("timestamptz")
                + ", PRIMARY KEY (scope, idempotency_key))");
    pg.dsl()
        .execute(
            "INSERT INTO old_keys (scope, idempotency_key, fingerprint, state, attempt_token,"
                + " attempt_count, recovery_point, locked_until, response_status, response_body,"
                + " created_at, completed_at, expires_at) VALUES ('s', 'k', 'f', 'completed', 1,"
                + " 1, 'finished', now(), 0, convert_to('stored', 'UTF8'), now(), now(),"
                + " now() + interval '1 day')");
    pg.dsl()
        .execute(
            "INSERT INTO old_keys (scope, idempotency_key, fingerprint, state, attempt_token,"
                + " attempt_count, recovery_point, locked_until, created_at, expires_at) VALUES"
                + " ('s', 'open', 'f', 'in_progress', 2, 1, 'first', now() - interval '1 minute',"
                + " now(), now() + interval '1 day')");

    pg.dsl().execute(MIGRATION.replace("nolock_idempotency_keys", "old_keys"));
    IdempotencyKeys<String> keys = keys(pg, "old_keys");
    keys.createTableIfMissing();

    assertThat(
            pg.dsl()
                .resultQuery(
                    "SELECT idempotency_key, principal, downstream_key::text FROM old_keys"
                        + " ORDER BY idempotency_key")
                .fetch()
                .map(r -> r.get(0) + "|" + r.get(1)))
        .containsExactly("k|", "open|");
    assertThat(
            pg.dsl().fetchValue("SELECT count(DISTINCT downstream_key) FROM old_keys").toString())
        .isEqualTo("2");
    java.util.List<String> ran = new java.util.ArrayList<>();
    Phases<String, RuntimeException> twoPhases =
        Phases.builder()
            .phase("first", a -> ran.add("first"))
            .phase("second", a -> ran.add("second"))
            .finish(a -> "resumed from " + a.resumedFrom());
    assertThat(keys.execute("s", Caller.anonymous(), "open", Fingerprint.of("f"), twoPhases))
        .isInstanceOfSatisfying(
            Outcome.Completed.class,
            done -> assertThat(done.result()).isEqualTo("resumed from first"));
    assertThat(ran)
        .as("the phase committed before the migration is not run again")
        .containsExactly("second");

    assertThat(keys.execute("s", Caller.anonymous(), "k", Fingerprint.of("f"), a -> "ran"))
        .isEqualTo(new Outcome.Replayed<>("stored"));
    assertThat(keys.execute("s", Caller.of("p"), "k", Fingerprint.of("f"), a -> "ran"))
        .isInstanceOf(Outcome.Completed.class);
  }

  /** The README's migration from the shape before callers. */
  static final String MIGRATION =
      """
      ALTER TABLE nolock_idempotency_keys
        ADD COLUMN principal text NOT NULL DEFAULT '',
        ADD COLUMN downstream_key uuid NOT NULL DEFAULT gen_random_uuid();
      ALTER TABLE nolock_idempotency_keys
        ALTER COLUMN principal DROP DEFAULT,
        ALTER COLUMN downstream_key DROP DEFAULT,
        DROP CONSTRAINT nolock_idempotency_keys_pkey,
        ADD PRIMARY KEY (scope, principal, idempotency_key);
      DROP INDEX IF EXISTS nolock_idempotency_keys_pending_idx;
      """;

  /** The table the call creates is accepted, also when it is called again. */
  @Test
  void theTableItCreatesIsAcceptedWhenCalledAgain(PostgresSchema pg) {
    IdempotencyKeys<String> keys = keys(pg, pg.schemaName() + ".fresh_keys");

    keys.createTableIfMissing();
    keys.createTableIfMissing();

    assertThat(keys.execute("s", Caller.anonymous(), "k", Fingerprint.of("f"), attempt -> "done"))
        .isInstanceOf(Outcome.Completed.class);
    assertThat(indexes(pg.dsl(), "fresh_keys"))
        .containsExactlyInAnyOrder(
            "fresh_keys_pkey", "fresh_keys_expires_idx", "fresh_keys_open_idx");
  }

  private static IdempotencyKeys<String> keys(PostgresSchema pg, String table) {
    return IdempotencyKeys.create(
        pg.dataSource(), IdempotencyConfig.custom().table(table).build(), ResultCodec.utf8());
  }

  private static java.util.List<String> indexes(DSLContext db, String table) {
    return db.resultQuery(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
                + " AND tablename = ?",
            table)
        .fetch(0, String.class);
  }
}
