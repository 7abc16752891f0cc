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

  @Test
  void theClaimTakesOverOnlyAnExpiredInProgressKeyWithTheSameFingerprintOnTheDatabaseClock() {
    table.claim(
        dsl,
        "payments",
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
        .contains("on conflict (\"scope\", \"idempotency_key\") do update")
        .contains("\"k\".\"locked_until\" <= clock_timestamp()")
        .contains("\"k\".\"fingerprint\" = excluded.\"fingerprint\"")
        .contains("\"expires_at\" = greatest(\"k\".\"expires_at\", excluded.\"expires_at\")")
        .contains("returning")
        .doesNotContain(SECRET_KEY)
        .doesNotContain("now()");
    assertThat(bindings.get(0)).contains("payments", SECRET_KEY, "fp", 3000L, 3_600_000L);
  }

  @Test
  void withoutTheFingerprintCheckTheTakeoverIgnoresTheFingerprint() {
    table.claim(
        dsl,
        "s",
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
        SECRET_KEY,
        42L,
        StoredResult.of(201, new byte[] {1}),
        Duration.ofHours(1),
        true,
        5);
    table.advance(
        dsl, "s", SECRET_KEY, 42L, "phase1", Duration.ofSeconds(3), Duration.ofHours(1), true, 5);
    table.release(dsl, "s", SECRET_KEY, 42L, 5);

    for (int i = 0; i < 3; i++) {
      assertThat(statements.get(i))
          .contains("\"attempt_token\" = ?")
          .contains("\"state\" = 'in_progress'")
          .doesNotContain(SECRET_KEY);
      assertThat(bindings.get(i)).contains(SECRET_KEY, 42L);
    }
  }

  @Test
  void aCommittedPhasePushesTheRetentionOutButNeverPullsItIn() {
    table.advance(
        dsl, "s", SECRET_KEY, 42L, "phase1", Duration.ofSeconds(3), Duration.ofHours(1), true, 5);

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
    table.claim(dsl, "s", SECRET_KEY, Fingerprint.of("fp"), lease, Duration.ofHours(1), true, 5);
    table.advance(dsl, "s", SECRET_KEY, 42L, "phase1", lease, Duration.ofHours(1), true, 5);

    assertThat(bindings.get(0)).contains(3001L).doesNotContain(3000L);
    assertThat(bindings.get(1)).contains(3001L).doesNotContain(3000L);
  }

  @Test
  void withoutTheAttemptCheckCompletionMatchesAnyAttempt() {
    table.complete(
        dsl,
        "s",
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
                    .contains("primary key (\"scope\", \"idempotency_key\")"),
            idx -> assertThat(idx).contains("create index if not exists \"idem_keys_expires_idx\""),
            pending ->
                assertThat(pending)
                    .contains("create index if not exists \"idem_keys_pending_idx\"")
                    .contains("(\"scope\", \"idempotency_key\")")
                    .contains("where \"state\" = 'in_progress'"));
  }
}
