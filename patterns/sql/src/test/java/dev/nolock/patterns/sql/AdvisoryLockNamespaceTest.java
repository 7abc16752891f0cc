package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

class AdvisoryLockNamespaceTest {

  private static final List<AdvisoryLockNamespace> NOLOCKS =
      List.of(
          AdvisoryLockNamespace.QUEUE_SCHEMA,
          AdvisoryLockNamespace.SCHEDULE_CLAIMS,
          AdvisoryLockNamespace.LOCK);

  /**
   * Pairs that plain concatenation (with or without a separator) would hash alike: "ab" + "c" and
   * "a" + "bc"; a name containing the separator; nolock's namespaces against each other and against
   * an application's with the same tail.
   */
  @Test
  void distinctPairsGiveDistinctHashInputs() {
    List<AdvisoryLockNamespace> spaces =
        List.of(
            AdvisoryLockNamespace.of("ab"),
            AdvisoryLockNamespace.of("a"),
            AdvisoryLockNamespace.of("a.b"),
            AdvisoryLockNamespace.of("queue.schema"),
            AdvisoryLockNamespace.QUEUE_SCHEMA,
            AdvisoryLockNamespace.SCHEDULE_CLAIMS,
            AdvisoryLockNamespace.LOCK);
    List<String> names = List.of("c", "bc", "b:c", ":c", "b.c", "orders", "schema:orders", "x/y");
    Set<String> inputs = new HashSet<>();
    for (AdvisoryLockNamespace space : spaces) {
      for (String name : names) {
        String input = space.hashInput(name);
        assertThat(inputs.add(input))
            .as("%s and %s give a new input, %s", space, name, input)
            .isTrue();
        assertThat(input.substring(0, input.indexOf(':')))
            .as("the namespace read back from %s", input)
            .isEqualTo(space.toString());
        assertThat(input.substring(input.indexOf(':') + 1)).isEqualTo(name);
      }
    }
  }

  @Test
  void nolocksComponentsHaveDistinctNamespaces() {
    assertThat(NOLOCKS).extracting(AdvisoryLockNamespace::toString).doesNotHaveDuplicates();
    assertThat(AdvisoryLockNamespace.QUEUE_SCHEMA.hashInput("orders"))
        .isEqualTo("nolock.queue.schema:orders");
    assertThat(AdvisoryLockNamespace.SCHEDULE_CLAIMS.hashInput("runs/report"))
        .isEqualTo("nolock.schedule.claims:runs/report");
    assertThat(AdvisoryLockNamespace.LOCK.hashInput("invoice-42"))
        .isEqualTo("nolock.lock:invoice-42");
  }

  @Test
  void aNamespaceThatCouldBlurTheFramingIsRefused() {
    for (String bad :
        new String[] {null, "", "a:b", ":", "Billing", ".a", "a b", "a\n", "x".repeat(64)}) {
      assertThatThrownBy(() -> AdvisoryLockNamespace.of(bad))
          .as("namespace %s", bad)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("advisory-lock namespace");
    }
  }

  @Test
  void nolocksNamespacesAreReserved() {
    for (String reserved :
        new String[] {"nolock", "nolock.lock", "nolock.queue.schema", "nolock.x"}) {
      assertThatThrownBy(() -> AdvisoryLockNamespace.of(reserved))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("reserved");
    }
    assertThat(AdvisoryLockNamespace.of("nolockers").hashInput("n")).isEqualTo("nolockers:n");
  }

  @Test
  void unnamespacedIsTheBareName() {
    assertThat(AdvisoryLockNamespace.unnamespaced().hashInput("orders")).isEqualTo("orders");
  }

  @Test
  void theInputIsBound() {
    String sql =
        DSL.using(SQLDialect.POSTGRES)
            .render(DSL.select(AdvisoryLockNamespace.LOCK.key("invoice-1'; drop table x")));

    assertThat(sql).isEqualTo("select hashtextextended(?, 0)");
    assertThat(
            DSL.using(SQLDialect.POSTGRES)
                .extractBindValues(
                    DSL.select(AdvisoryLockNamespace.LOCK.key("invoice-1'; drop table x"))))
        .containsExactly("nolock.lock:invoice-1'; drop table x");
  }
}
