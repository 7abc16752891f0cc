package dev.nolock.ownership.internal;

import static org.assertj.core.api.Assertions.assertThat;

import java.time.Duration;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.conf.ParamType;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

/** The apply transaction's first statement, as rendered for PostgreSQL. */
class OwnerTableSqlTest {

  private final DSLContext dsl = DSL.using(SQLDialect.POSTGRES);
  private final OwnerTable table = new OwnerTable(DSL.name("app", "owners"));

  private String render(Safeguards safeguards) {
    return table
        .advanceQuery(
            dsl,
            "group-1",
            "orders",
            3,
            42,
            7,
            "owner-a",
            safeguards,
            Duration.ofSeconds(5),
            Duration.ofSeconds(30))
        .getSQL(ParamType.INLINED);
  }

  @Test
  void theAdvanceChecksTheEpochAndOwnerAndMovesTheOffsetOnlyForward() {
    String sql = render(Safeguards.ALL);
    assertThat(sql)
        .startsWith("update \"app\".\"owners\" set \"last_applied_offset\" = 42 where (")
        .contains("\"consumer_group\" = 'group-1'")
        .contains("\"topic\" = 'orders'")
        .contains("\"partition\" = 3")
        .contains("\"epoch\" = 7")
        .contains("\"owner\" = 'owner-a'")
        .contains("\"last_applied_offset\" < 42")
        .contains("set_config('statement_timeout', '5000', true) is not null")
        .contains("set_config('idle_in_transaction_session_timeout', '30000', true) is not null");
  }

  @Test
  void theNegativeControlsDropExactlyTheirCheck() {
    assertThat(render(new Safeguards(false, true)))
        .doesNotContain("\"epoch\" =")
        .doesNotContain("\"owner\" =")
        .contains("\"last_applied_offset\" < 42");
    assertThat(render(new Safeguards(false, false)))
        .doesNotContain("\"epoch\" =")
        .doesNotContain("\"last_applied_offset\" <")
        .contains("greatest(\"last_applied_offset\", 42)");
  }

  @Test
  void theTransactionBoundsAreBoundValuesNotConcatenatedSql() {
    var limit = table.limitQuery(dsl, Duration.ofSeconds(5), Duration.ofSeconds(30));
    assertThat(limit.getSQL(ParamType.INDEXED))
        .isEqualTo(
            "select set_config('statement_timeout', ?, true),"
                + " set_config('idle_in_transaction_session_timeout', ?, true)");
    assertThat(limit.getBindValues()).containsExactly("5000", "30000");
  }
}
