package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.val;

import com.zaxxer.hikari.HikariDataSource;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;
import org.jooq.types.DayToSecond;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/** {@link PgClock} evaluated by the real PostgreSQL from a fixed start, so no clock is read. */
class PgClockIT {

  private static final OffsetDateTime START =
      OffsetDateTime.of(2026, 3, 29, 0, 59, 59, 999_000_000, ZoneOffset.UTC);
  private static final Field<OffsetDateTime> START_FIELD =
      val(START, SQLDataType.TIMESTAMPWITHTIMEZONE);

  private static HikariDataSource pool;
  private static DSLContext dsl;

  @BeforeAll
  static void connect() {
    pool = Pg.pool();
    dsl = DSL.using(pool, SQLDialect.POSTGRES);
  }

  @AfterAll
  static void close() {
    pool.close();
  }

  @Test
  void aLeaseNeverEndsBeforeTheCallersDeadline() {
    for (Duration lease :
        new Duration[] {
          Duration.ofMillis(1000),
          Duration.ofMillis(1000).plusNanos(1),
          Duration.ofMillis(1000).plusNanos(999_999),
          Duration.ofNanos(1),
          Duration.ofHours(26).plusNanos(500_000)
        }) {
      OffsetDateTime end = dsl.select(PgClock.plus(START_FIELD, lease)).fetchSingle().value1();

      assertThat(end).as("end of a %s lease", lease).isAfterOrEqualTo(START.plus(lease));
      assertThat(Duration.between(START.plus(lease), end)).isLessThan(Duration.ofMillis(1));
    }
  }

  @Test
  void roundingDownWouldEndTheLeaseBeforeTheDeadline() {
    // The rule the idempotency module had: whole milliseconds by truncation.
    Duration lease = Duration.ofMillis(1000).plusNanos(1);
    Field<OffsetDateTime> roundedDown =
        START_FIELD.plus(
            val(lease.toMillis()).times(inline(DayToSecond.valueOf(Duration.ofMillis(1)))));

    OffsetDateTime end = dsl.select(roundedDown).fetchSingle().value1();

    assertThat(end).isBefore(START.plus(lease));
  }

  @Test
  void theDatabaseClockIsReadWhenEvaluatedAndTheLengthIsBound() {
    String sql = dsl.render(DSL.select(PgClock.plus(Duration.ofMillis(600))));
    assertThat(sql)
        .contains("clock_timestamp() + (? * ")
        .doesNotContain("600")
        .doesNotContain("now()");
    assertThat(dsl.extractBindValues(PgClock.plus(Duration.ofMillis(600)))).containsExactly(600L);

    var r = dsl.select(PgClock.minus(Duration.ofHours(1)), PgClock.now()).fetchSingle();
    assertThat(Duration.between(r.value1(), r.value2()))
        .isGreaterThanOrEqualTo(Duration.ofHours(1));
  }

  @Test
  void aNegativeOrMissingLengthIsRefusedWithAFix() {
    assertThatThrownBy(() -> PgClock.plus(Duration.ofMillis(-1)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("zero or more");
    assertThatThrownBy(() -> PgClock.ceilMillis(null)).isInstanceOf(IllegalArgumentException.class);
    assertThat(PgClock.ceilMillis(Duration.ofNanos(599_999_999))).isEqualTo(600);
    assertThat(PgClock.ceilMillis(Duration.ofNanos(600_000_001))).isEqualTo(601);
  }
}
