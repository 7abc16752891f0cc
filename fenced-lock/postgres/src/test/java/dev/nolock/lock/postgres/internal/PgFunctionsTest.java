package dev.nolock.lock.postgres.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

class PgFunctionsTest {

  @Test
  void theTtlIsRoundedUpToWholeMillisecondsSoTheStoredLeaseIsNeverShorter() {
    assertThat(PgFunctions.ceilMillis(Duration.ofMillis(600))).isEqualTo(600);
    assertThat(PgFunctions.ceilMillis(Duration.ofNanos(600_000_001))).isEqualTo(601);
    assertThat(PgFunctions.ceilMillis(Duration.ofNanos(599_999_999))).isEqualTo(600);
  }

  @Test
  void theTtlIsABoundNumberOfMillisecondsOnTheDatabaseClock() {
    String sql =
        DSL.using(SQLDialect.POSTGRES)
            .render(DSL.select(PgFunctions.clockTimestampPlus(Duration.ofMillis(600))));

    assertThat(sql)
        .contains("clock_timestamp() + (? * ")
        .doesNotContain("600")
        .doesNotContain("now()");
  }

  @Test
  void theAdvisoryKeyIsBound() {
    String sql =
        DSL.using(SQLDialect.POSTGRES)
            .render(DSL.select(PgFunctions.tryAdvisoryXactLock("invoice-1'; drop table x")));

    assertThat(sql).isEqualTo("select pg_try_advisory_xact_lock(hashtextextended(?, 0))");
  }
}
