package dev.nolock.idempotency.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.idempotency.Fingerprint;
import dev.nolock.idempotency.StoredResult;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.tools.jdbc.MockConnection;
import org.jooq.tools.jdbc.MockResult;
import org.junit.jupiter.api.Test;

/** The statements as PostgreSQL receives them, rendered through a mock connection. */
class KeyTableSqlTest {

  private static final String SECRET_KEY = "key-that-must-be-bound";
  private static final String PRINCIPAL = "principal-that-must-be-bound";

  private final List<String> statements = new ArrayList<>();
  private final List<List<Object>> bindings = new ArrayList<>();
  private final DSLContext dsl =
      DSL.using(
          new MockConnection(
              context -> {
                statements.add(context.sql());
                bindings.add(List.of(context.bindings()));
                // An empty result: what a claim on a held key returns.
                return new MockResult[] {
                  new MockResult(
                      0,
                      DSL.using(SQLDialect.POSTGRES)
                          .newResult(
                              DSL.field("attempt_token", Long.class),
                              DSL.field("attempt_count", Integer.class),
                              DSL.field("recovery_point", String.class)))
                };
              }),
          SQLDialect.POSTGRES);
  private final KeyTable table = new KeyTable(DSL.name("app", "idem_keys"));

  /**
   * The claim, the read and the completion run from text rendered once ({@code RenderedStatement}),
   * in both forms of each safeguard: each must reach the driver exactly as the statement built with
   * the same values does (a value passed in another place would show here), the claim's downstream
   * key aside, which is fresh per call. Both run on the mock connection, so what is compared is
   * what the driver receives: the text and every bound value, with its Java type.
   */
  @Test
  void theStatementsRenderedOnceReachTheDriverAsTheStatementsBuiltWithTheSameValues() {
    StoredResult result = StoredResult.of(201, new byte[] {7, 8});
    Duration lease = Duration.ofNanos(3_000_000_001L);
    Duration retention = Duration.ofHours(1);
    for (boolean safeguard : new boolean[] {true, false}) {
      table.claim(
          dsl,
          "payments",
          PRINCIPAL,
          SECRET_KEY,
          Fingerprint.of("fp"),
          lease,
          retention,
          safeguard,
          5);
      String rendered = lastSent();
      java.util.UUID downstream = (java.util.UUID) bindings.get(bindings.size() - 1).get(4);
      table
          .builtClaim(
              dsl,
              "payments",
              PRINCIPAL,
              SECRET_KEY,
              Fingerprint.of("fp"),
              downstream,
              lease,
              retention,
              safeguard)
          .fetch();
      assertThat(rendered).isEqualTo(lastSent());

      table.complete(dsl, "payments", PRINCIPAL, SECRET_KEY, 41, result, retention, safeguard, 5);
      rendered = lastSent();
      table
          .builtComplete(dsl, "payments", PRINCIPAL, SECRET_KEY, 41, result, retention, safeguard)
          .execute();
      assertThat(rendered).isEqualTo(lastSent());
    }
    table.read(dsl, "payments", PRINCIPAL, SECRET_KEY, 5);
    String rendered = lastSent();
    table.builtRead(dsl, "payments", PRINCIPAL, SECRET_KEY).fetch();
    assertThat(rendered).isEqualTo(lastSent());
  }

  /** The last statement the mock connection received, and its values with their Java types. */
  private String lastSent() {
    return statements.get(statements.size() - 1)
        + " "
        + bindings.get(bindings.size() - 1).stream()
            .map(
                value ->
                    value == null
                        ? "null"
                        : (value instanceof byte[] bytes
                                ? java.util.Arrays.toString(bytes)
                                : value.toString())
                            + " ("
                            + value.getClass().getSimpleName()
                            + ")")
            .toList();
  }

  @Test
  void theClaimTakesOverOnlyAnExpiredInProgressKeyWithTheSameFingerprintOnTheDatabaseClock() {
    table.claim(
        dsl,
        "payments",
        PRINCIPAL,
        SECRET_KEY,
        Fingerprint.of("fp"),
        Duration.ofSeconds(3),
        Duration.ofHours(1),
        true,
        5);

    String sql = statements.get(0);
    assertThat(sql)
        .contains("insert into \"app\".\"idem_keys\" as \"k\"")
        .contains("nextval('\"app\".\"idem_keys_attempt_seq\"')")
        .contains("on conflict (\"scope\", \"principal\", \"idempotency_key\") do update")
        .contains(
            "returning \"attempt_token\", \"attempt_count\", \"recovery_point\","
                + " \"downstream_key\"")
        .doesNotContain("\"downstream_key\" = excluded")
        .contains("\"k\".\"locked_until\" <= clock_timestamp()")
        .contains("\"k\".\"fingerprint\" = excluded.\"fingerprint\"")
        .contains("\"expires_at\" = greatest(\"k\".\"expires_at\", excluded.\"expires_at\")")
        .contains("returning")
        .doesNotContain(SECRET_KEY)
        .doesNotContain("now()");
    assertThat(bindings.get(0))
        .contains("payments", PRINCIPAL, SECRET_KEY, "fp", 3000L, 3_600_000L);
  }

  @Test
  void withoutTheFingerprintCheckTheTakeoverIgnoresTheFingerprint() {
    table.claim(
        dsl,
        "s",
        PRINCIPAL,
        SECRET_KEY,
        Fingerprint.of("fp"),
        Duration.ofSeconds(3),
        Duration.ofHours(1),
        false,
        5);

    assertThat(statements.get(0)).doesNotContain("excluded.\"fingerprint\"");
  }

  @Test
  void completionIsConditionalOnTheAttemptTokenAndTheInProgressState() {
    table.complete(
        dsl,
        "s",
        PRINCIPAL,
        SECRET_KEY,
        42L,
        StoredResult.of(201, new byte[] {1}),
        Duration.ofHours(1),
        true,
        5);
    table.advance(
        dsl,
        "s",
        PRINCIPAL,
        SECRET_KEY,
        42L,
        "phase1",
        Duration.ofSeconds(3),
        Duration.ofHours(1),
        true,
        5);
    table.release(dsl, "s", PRINCIPAL, SECRET_KEY, 42L, 5);

    for (int i = 0; i < 3; i++) {
      assertThat(statements.get(i))
          .contains("\"attempt_token\" = ?")
          .contains("\"state\" = 'in_progress'")
          .doesNotContain(SECRET_KEY);
      assertThat(bindings.get(i)).contains(PRINCIPAL, SECRET_KEY, 42L);
    }
  }

  @Test
  void aCommittedPhasePushesTheRetentionOutButNeverPullsItIn() {
    table.advance(
        dsl,
        "s",
        PRINCIPAL,
        SECRET_KEY,
        42L,
        "phase1",
        Duration.ofSeconds(3),
        Duration.ofHours(1),
        true,
        5);

    assertThat(statements.get(0))
        .contains("\"expires_at\" = greatest(\"expires_at\", (clock_timestamp() + (? *");
    assertThat(bindings.get(0)).contains(3000L, 3_600_000L);
  }

  @Test
  void aLeaseIsRoundedUpSoItNeverEndsBeforeTheCallersDeadline() {
    // One nanosecond past 3 s: rounded down, the stored lease would end up to a millisecond
    // before the deadline the attempt measures on its own clock, and a retry could take the key
    // over while the attempt still believes it holds it.
    Duration lease = Duration.ofSeconds(3).plusNanos(1);
    table.claim(
        dsl, "s", PRINCIPAL, SECRET_KEY, Fingerprint.of("fp"), lease, Duration.ofHours(1), true, 5);
    table.advance(
        dsl, "s", PRINCIPAL, SECRET_KEY, 42L, "phase1", lease, Duration.ofHours(1), true, 5);

    assertThat(bindings.get(0)).contains(3001L).doesNotContain(3000L);
    assertThat(bindings.get(1)).contains(3001L).doesNotContain(3000L);
  }

  @Test
  void withoutTheAttemptCheckCompletionMatchesAnyAttempt() {
    table.complete(
        dsl,
        "s",
        PRINCIPAL,
        SECRET_KEY,
        42L,
        StoredResult.of(201, new byte[] {1}),
        Duration.ofHours(1),
        false,
        5);

    assertThat(statements.get(0)).doesNotContain("attempt_token");
  }

  @Test
  void thePurgeDeletesABoundedBatchThroughAMaterializedSkipLockedCte() {
    table.purgeBatch(dsl, 500, 5);

    String sql = statements.get(0);
    assertThat(sql)
        .contains("as materialized")
        .contains("for update skip locked")
        .contains("fetch next ? rows only")
        .contains("\"expires_at\" <= clock_timestamp()")
        .contains(
            "(\"state\" = 'completed' or (\"recovery_point\" = 'started' and \"locked_until\" <="
                + " clock_timestamp()))");
    assertThat(bindings.get(0)).contains(500);
  }

  @Test
  void theDdlCreatesTheSequenceTheTableTheExpiryIndexAndThePartialIndexOfInProgressKeys() {
    assertThat(table.createIfMissing(dsl))
        .extracting(q -> q.getSQL())
        .satisfiesExactly(
            seq -> assertThat(seq).contains("create sequence if not exists"),
            tbl ->
                assertThat(tbl)
                    .contains("create table if not exists \"app\".\"idem_keys\"")
                    .contains("\"principal\" text not null")
                    .contains("\"downstream_key\" uuid not null")
                    .contains("primary key (\"scope\", \"principal\", \"idempotency_key\")"),
            idx -> assertThat(idx).contains("create index if not exists \"idem_keys_expires_idx\""),
            pending ->
                assertThat(pending)
                    .contains("create index if not exists \"idem_keys_open_idx\"")
                    .contains("(\"scope\", \"principal\", \"idempotency_key\")")
                    .contains("where \"state\" = 'in_progress'"));
  }

  /**
   * Every statement on one key names it by all three columns of the primary key. The attempt token
   * alone would keep the updates on the right row (it is unique across keys), but the read, {@code
   * forget} and the purge's join have no token: without the principal there, one caller's statement
   * would read or delete another caller's row with the same scope and key.
   */
  @Test
  void everyStatementOnOneKeyNamesTheScopeThePrincipalAndTheKey() {
    table.read(dsl, "s", PRINCIPAL, SECRET_KEY, 5);
    table.forget(dsl, "s", PRINCIPAL, SECRET_KEY, 5);
    table.complete(
        dsl,
        "s",
        PRINCIPAL,
        SECRET_KEY,
        42L,
        StoredResult.of(201, new byte[] {1}),
        Duration.ofHours(1),
        false,
        5);

    for (int i = 0; i < 3; i++) {
      assertThat(statements.get(i))
          .as(statements.get(i))
          .contains("\"scope\" = ?")
          .contains("\"principal\" = ?")
          .contains("\"idempotency_key\" = ?")
          .doesNotContain(PRINCIPAL);
      assertThat(bindings.get(i)).contains("s", PRINCIPAL, SECRET_KEY);
    }
  }

  @Test
  void thePurgeDeletesTheExpiredRowsByScopePrincipalAndKey() {
    table.purgeBatch(dsl, 500, 5);

    assertThat(statements.get(0))
        .contains("select \"scope\", \"principal\", \"idempotency_key\"")
        .contains("\"k\".\"principal\" = \"expired\".\"principal\"")
        .contains("\"k\".\"idempotency_key\" = \"expired\".\"idempotency_key\"");
  }

  @Test
  void theAbandonedKeysArePagedByScopePrincipalAndKey() {
    table.listAbandoned(dsl, "s", PRINCIPAL, SECRET_KEY, 10, 5);

    assertThat(statements.get(0))
        .contains("(\"scope\", \"principal\", \"idempotency_key\") > (?, ?, ?)")
        .contains("order by \"scope\", \"principal\", \"idempotency_key\"");
    assertThat(bindings.get(0)).containsSubsequence("s", PRINCIPAL, SECRET_KEY);
  }

  /** The longest table name leaves every derived name within PostgreSQL's 63 bytes. */
  @Test
  void theNamesDerivedFromTheLongestTableFit() {
    KeyTable longest =
        new KeyTable(
            DSL.name("k".repeat(dev.nolock.idempotency.IdempotencyConfig.MAX_TABLE_NAME_LENGTH)));
    assertThat(longest.createIfMissing(dsl))
        .extracting(q -> q.getSQL())
        .allSatisfy(
            ddl -> {
              java.util.regex.Matcher names =
                  java.util.regex.Pattern.compile("\"([a-z_]+)\"").matcher(ddl);
              while (names.find()) {
                assertThat(names.group(1).length()).as(names.group(1)).isLessThanOrEqualTo(63);
              }
            });
  }
}
