package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
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
   * an application's with the same tail; and names framed like nolock's inputs, which only {@link
   * AdvisoryLockNamespace#unnamespaced()} could turn into one of them (it refuses them instead).
   */
  @Test
  void distinctPairsGiveDistinctHashInputs() {
    Map<AdvisoryLockNamespace, String> spaces = new LinkedHashMap<>();
    spaces.put(AdvisoryLockNamespace.of("ab"), "ab");
    spaces.put(AdvisoryLockNamespace.of("a"), "a");
    spaces.put(AdvisoryLockNamespace.of("a.b"), "a.b");
    spaces.put(AdvisoryLockNamespace.of("queue.schema"), "queue.schema");
    spaces.put(AdvisoryLockNamespace.QUEUE_SCHEMA, "nolock.queue.schema");
    spaces.put(AdvisoryLockNamespace.SCHEDULE_CLAIMS, "nolock.schedule.claims");
    spaces.put(AdvisoryLockNamespace.LOCK, "nolock.lock");
    List<String> names =
        List.of(
            "c",
            "bc",
            "b:c",
            ":c",
            "b.c",
            "orders",
            "schema:orders",
            "x/y",
            "public.runs/report",
            "nolock.schedule.claims:public.runs/report",
            "nolock.queue.schema:orders",
            "nolock.lock:invoice-42",
            "nolock:c",
            "nolock.x:c");
    Map<String, String> inputs = new HashMap<>();
    for (Map.Entry<AdvisoryLockNamespace, String> space : spaces.entrySet()) {
      for (String name : names) {
        String input = space.getKey().hashInput(name);
        assertThat(inputs.put(input, space.getValue() + " with " + name))
            .as("%s and %s give a new input, %s", space.getValue(), name, input)
            .isNull();
        assertThat(input.substring(0, input.indexOf(':')))
            .as("the namespace read back from %s", input)
            .isEqualTo(space.getValue());
        assertThat(input.substring(input.indexOf(':') + 1)).isEqualTo(name);
      }
    }
    for (String name : names) {
      String input;
      try {
        input = AdvisoryLockNamespace.unnamespaced().hashInput(name);
      } catch (IllegalArgumentException refused) {
        continue;
      }
      String owner = inputs.get(input);
      assertThat(owner == null || !owner.startsWith("nolock"))
          .as("the bare name %s is the input of %s", name, owner)
          .isTrue();
    }
  }

  /**
   * The one overlap the guarantee leaves: a bare name that looks like an application's framing is
   * that application's lock (the reason to choose {@code unnamespaced()}: excluding such code).
   */
  @Test
  void aBareNameCanBeAnApplicationsFramedInput() {
    assertThat(AdvisoryLockNamespace.unnamespaced().hashInput("billing:invoice-42"))
        .isEqualTo(AdvisoryLockNamespace.of("billing").hashInput("invoice-42"));
  }

  @Test
  void unnamespacedRefusesANameFramedAsNolocksOwn() {
    for (String framed :
        new String[] {
          "nolock.schedule.claims:public.runs/report",
          "nolock.queue.schema:orders",
          "nolock.lock:invoice-42",
          "nolock:x",
          "nolock.anything:x",
          "nolock.:"
        }) {
      assertThatThrownBy(() -> AdvisoryLockNamespace.unnamespaced().hashInput(framed))
          .as("bare name %s", framed)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("reserved for nolock")
          .hasMessageContaining("AdvisoryLockNamespace.of(");
      assertThatThrownBy(() -> AdvisoryLockNamespace.unnamespaced().key(framed))
          .isInstanceOf(IllegalArgumentException.class);
    }
    for (String fine : new String[] {"nolock.lock", "nolockers:x", "x:nolock.lock:y", "nolock"}) {
      assertThat(AdvisoryLockNamespace.unnamespaced().hashInput(fine)).isEqualTo(fine);
    }
  }

  @Test
  void aBadNameIsRefusedAtTheEdgeLikeEveryOtherName() {
    for (AdvisoryLockNamespace space :
        List.of(AdvisoryLockNamespace.LOCK, AdvisoryLockNamespace.unnamespaced())) {
      for (String bad :
          new String[] {
            null,
            "",
            " ",
            "a\u0000b",
            "a\nb",
            "a\uD800",
            "k".repeat(AdvisoryLockNamespace.MAX_NAME_LENGTH + 1)
          }) {
        assertThatThrownBy(() -> space.key(bad))
            .as("%s with name %s", space, bad)
            .isInstanceOf(IllegalArgumentException.class)
            .hasMessageContaining("advisory lock name");
        assertThatThrownBy(() -> space.hashInput(bad)).isInstanceOf(IllegalArgumentException.class);
      }
    }
    String longest = "k".repeat(AdvisoryLockNamespace.MAX_NAME_LENGTH);
    assertThat(AdvisoryLockNamespace.LOCK.hashInput(longest)).isEqualTo("nolock.lock:" + longest);
  }

  @Test
  void isAValue() {
    assertThat(AdvisoryLockNamespace.of("billing"))
        .isEqualTo(AdvisoryLockNamespace.of("billing"))
        .hasSameHashCodeAs(AdvisoryLockNamespace.of("billing"))
        .isNotEqualTo(AdvisoryLockNamespace.of("billing2"))
        .isNotEqualTo(AdvisoryLockNamespace.unnamespaced());
    assertThat(AdvisoryLockNamespace.unnamespaced())
        .isEqualTo(AdvisoryLockNamespace.unnamespaced())
        .isNotEqualTo(AdvisoryLockNamespace.of("unnamespaced"));
  }

  @Test
  void toStringTellsUnnamespacedFromEveryNamespace() {
    assertThat(AdvisoryLockNamespace.of("billing")).hasToString("AdvisoryLockNamespace[billing]");
    assertThat(AdvisoryLockNamespace.LOCK).hasToString("AdvisoryLockNamespace[nolock.lock]");
    assertThat(AdvisoryLockNamespace.unnamespaced())
        .hasToString("AdvisoryLockNamespace.unnamespaced()");
    assertThat(AdvisoryLockNamespace.unnamespaced().toString())
        .isNotEqualTo(AdvisoryLockNamespace.of("unnamespaced").toString());
  }

  @Test
  void nolocksComponentsHaveDistinctNamespaces() {
    assertThat(NOLOCKS).doesNotHaveDuplicates();
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
        new String[] {
          null, "", "a\u0000", "a:b", ":", "Billing", ".a", "a b", "a\n", "x".repeat(64)
        }) {
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

  /** A name computed on the server keeps the namespace's framing, the namespace bound. */
  @Test
  void aServerSideNameIsFramedByTheBoundNamespace() {
    var query =
        DSL.select(
            AdvisoryLockNamespace.SCHEDULE_CLAIMS.key(DSL.field("n.oid::text", String.class)));

    assertThat(DSL.using(SQLDialect.POSTGRES).render(query))
        .startsWith("select hashtextextended(")
        .contains("?")
        .contains("n.oid::text")
        .endsWith(", 0)");
    assertThat(DSL.using(SQLDialect.POSTGRES).extractBindValues(query))
        .containsExactly("nolock.schedule.claims:");
    assertThatThrownBy(() -> AdvisoryLockNamespace.unnamespaced().key(DSL.field("n", String.class)))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("of(\"yours\")");
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
