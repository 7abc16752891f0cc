package dev.nolock.lock.postgres.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.sql.AdvisoryLockNamespace;
import dev.nolock.patterns.sql.PgClock;
import java.time.Duration;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

class PgFunctionsTest {

  @Test
  void theTtlIsRoundedUpToWholeMillisecondsSoTheStoredLeaseIsNeverShorter() {
    assertThat(PgClock.ceilMillis(Duration.ofMillis(600))).isEqualTo(600);
    assertThat(PgClock.ceilMillis(Duration.ofNanos(600_000_001))).isEqualTo(601);
    assertThat(PgClock.ceilMillis(Duration.ofNanos(599_999_999))).isEqualTo(600);
    // The lock's own statements use that rule: a renewal one nanosecond past 600 ms binds 601.
    assertThat(
            DSL.using(SQLDialect.POSTGRES)
                .extractBindValues(
                    new LockTable(DSL.name("t"), DSL.name("t_waiters"))
                        .renew(
                            DSL.using(SQLDialect.POSTGRES),
                            "n",
                            "o",
                            1,
                            Duration.ofNanos(600_000_001))))
        .contains(601L);
  }

  @Test
  void theTtlIsABoundNumberOfMillisecondsOnTheDatabaseClock() {
    String sql =
        DSL.using(SQLDialect.POSTGRES)
            .render(
                new LockTable(DSL.name("t"), DSL.name("t_waiters"))
                    .renew(DSL.using(SQLDialect.POSTGRES), "n", "o", 1, Duration.ofMillis(600)));

    assertThat(sql)
        .contains("clock_timestamp() + (? * ")
        .doesNotContain("600")
        .doesNotContain("now()");
  }

  @Test
  void theAdvisoryKeyIsBoundInItsNamespace() {
    var select =
        DSL.select(
            PgFunctions.tryAdvisoryXactLock(
                AdvisoryLockNamespace.LOCK, "invoice-1'; drop table x"));

    assertThat(DSL.using(SQLDialect.POSTGRES).render(select))
        .isEqualTo("select pg_try_advisory_xact_lock(hashtextextended(?, 0))");
    assertThat(DSL.using(SQLDialect.POSTGRES).extractBindValues(select))
        .containsExactly("nolock.lock:invoice-1'; drop table x");
  }
}
