package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.val;

import com.zaxxer.hikari.HikariDataSource;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import org.jooq.Condition;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * {@link LeasedRow}'s claim, extend and finish against the real PostgreSQL, on a table of its own.
 * A lease "runs out" by moving its end into the past on the database's clock, never by waiting.
 */
class LeasedRowIT {

  private static final Duration LEASE = Duration.ofMinutes(5);
  private static final Field<String> KEY = field(name("name"), SQLDataType.VARCHAR);
  private static final Field<String> OWNER = field(name("owner"), SQLDataType.VARCHAR);
  private static final Field<Long> ATTEMPT = field(name("attempt"), SQLDataType.BIGINT);

  private static HikariDataSource pool;
  private static DSLContext dsl;
  private static Name table;
  private static LeasedRow rows;

  @BeforeAll
  static void table() {
    pool = Pg.pool();
    dsl = DSL.using(pool, SQLDialect.POSTGRES);
    table = name("nolock_lr_" + UUID.randomUUID().toString().replace("-", "").substring(0, 12));
    dsl.execute(
        "CREATE TABLE {0} (name text PRIMARY KEY, owner text NOT NULL, attempt bigint NOT NULL,"
            + " until timestamptz NOT NULL)",
        DSL.table(table));
    rows = LeasedRow.of(table, "until", "attempt");
  }

  @AfterAll
  static void drop() {
    dsl.execute("DROP TABLE IF EXISTS {0}", DSL.table(table));
    pool.close();
  }

  private static Long claim(String key, String owner) {
    return rows.claim(LEASE)
        .key(KEY, key)
        .holder(OWNER, val(owner))
        .build(dsl)
        .returningResult(ATTEMPT)
        .fetchOptional()
        .map(r -> r.value1())
        .orElse(null);
  }

  private static Condition mine(String key, String owner, long attempt) {
    return KEY.eq(key).and(OWNER.eq(owner)).and(ATTEMPT.eq(attempt));
  }

  private static void runOut(String key) {
    dsl.execute(
        "UPDATE {0} SET until = clock_timestamp() - interval '1 second' WHERE name = {1}",
        DSL.table(table), val(key));
  }

  @Test
  void aHeldRowIsNotClaimedAndAnExpiredOneIsTakenOverWithAHigherAttempt() {
    String key = UUID.randomUUID().toString();
    assertThat(claim(key, "A")).isEqualTo(1L);
    assertThat(claim(key, "B")).as("held by A").isNull();

    runOut(key);

    assertThat(claim(key, "B")).isEqualTo(2L);
    assertThat(dsl.fetchValue("SELECT owner FROM {0} WHERE name = {1}", DSL.table(table), val(key)))
        .isEqualTo("B");
  }

  @Test
  void anExtensionNeedsTheHolderAndAnUnexpiredLease() {
    String key = UUID.randomUUID().toString();
    long attempt = claim(key, "A");

    assertThat(rows.extend(dsl, mine(key, "A", attempt), LEASE, Map.of()).execute()).isEqualTo(1);
    assertThat(rows.extend(dsl, mine(key, "B", attempt), LEASE, Map.of()).execute()).isZero();
    assertThat(rows.extend(dsl, mine(key, "A", attempt + 1), LEASE, Map.of()).execute()).isZero();

    runOut(key);

    assertThat(rows.extend(dsl, mine(key, "A", attempt), LEASE, Map.of()).execute())
        .as("a lease that ran out is not revived")
        .isZero();
  }

  @Test
  void aFinishedRowCanBeClaimedAtOnceAndAStaleFinishChangesNothing() {
    String key = UUID.randomUUID().toString();
    long first = claim(key, "A");

    assertThat(rows.finish(dsl, mine(key, "A", first), Map.of()).execute()).isEqualTo(1);
    long second = claim(key, "B");
    assertThat(second).isEqualTo(first + 1);

    assertThat(rows.finish(dsl, mine(key, "A", first), Map.of()).execute())
        .as("A's finish after B's claim")
        .isZero();
    assertThat(claim(key, "C")).as("still held by B").isNull();
  }

  @Test
  void theStatementsBindEveryValueAndRefuseALeaseThatIsNotPositive() {
    String secret = "x'; drop table t; --";
    String sql = rows.claim(LEASE).key(KEY, secret).holder(OWNER, val(secret)).build(dsl).getSQL();
    assertThat(sql)
        .doesNotContain(secret)
        .contains("on conflict (\"name\") do update")
        .contains("\"l\".\"until\" <= clock_timestamp()")
        .contains("\"attempt\" = (\"l\".\"attempt\" + 1)");
    assertThatThrownBy(() -> rows.claim(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("positive");
    assertThatThrownBy(() -> rows.claim(LEASE).build(dsl))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("key(column, value)");
  }
}
