package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.ManualLeaseClock;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicReference;
import org.jooq.DSLContext;
import org.jooq.QueryPart;
import org.jooq.SQLDialect;
import org.jooq.Table;
import org.jooq.VisitContext;
import org.jooq.VisitListener;
import org.jooq.conf.MappedSchema;
import org.jooq.conf.RenderMapping;
import org.jooq.conf.Settings;
import org.jooq.impl.DSL;
import org.jooq.impl.DefaultConfiguration;
import org.junit.jupiter.api.Test;

/**
 * The fence's upsert (step 1) runs from text rendered once ({@link RenderedStatement}) per dialect
 * and settings: it must send exactly what the upsert built for the call sends, whatever settings
 * the caller's contexts take turns with, and must follow a visit listener that rewrites it per
 * call.
 */
class FenceSqlTest {

  private final Fence fence = Fence.onTable("app.fences");

  private static Lease lease(String lock, String owner, long token) {
    return new Lease(
        lock,
        owner,
        FencingToken.of(token),
        Deadline.forHolder(new ManualLeaseClock(), 0, Duration.ofSeconds(10)));
  }

  private static String sent(DSLContext dsl, org.jooq.Query query) {
    return RenderedStatement.sent(dsl, query);
  }

  @Test
  void theUpsertRenderedOnceSendsWhatTheUpsertBuiltForTheCallSends() {
    DSLContext dsl = DSL.using(SQLDialect.POSTGRES);

    for (Lease lease :
        new Lease[] {lease("invoice-7", "a#1", 3), lease("x", "b#2", 9_000_000_000L)}) {
      assertThat(sent(dsl, fence.advanceStatement(dsl, lease)))
          .isEqualTo(sent(dsl, fence.builtAdvance(dsl, lease)));
    }
  }

  @Test
  void contextsWithOtherSettingsTakingTurnsEachSendTheirOwnText() {
    DSLContext plain = DSL.using(SQLDialect.POSTGRES);
    DSLContext mapped =
        DSL.using(
            SQLDialect.POSTGRES,
            new Settings()
                .withRenderMapping(
                    new RenderMapping()
                        .withSchemata(new MappedSchema().withInput("app").withOutput("tenant_b"))));
    Lease lease = lease("invoice-7", "a#1", 3);

    for (DSLContext dsl : new DSLContext[] {plain, mapped, plain, mapped}) {
      assertThat(sent(dsl, fence.advanceStatement(dsl, lease)))
          .isEqualTo(sent(dsl, fence.builtAdvance(dsl, lease)));
    }
    assertThat(sent(mapped, fence.advanceStatement(mapped, lease))).contains("\"tenant_b\"");
    assertThat(sent(plain, fence.advanceStatement(plain, lease))).doesNotContain("tenant_b");
  }

  @Test
  void aVisitListenerThatRewritesTheUpsertPerCallIsFollowedOnEveryCall() {
    AtomicReference<String> tenant = new AtomicReference<>("tenant_a");
    VisitListener tenantSchema =
        new VisitListener() {
          @Override
          public void visitStart(VisitContext context) {
            QueryPart part = context.queryPart();
            if (part instanceof Table<?> table && "fences".equals(table.getName())) {
              context.queryPart(DSL.table(DSL.name(tenant.get(), "fences")));
            }
          }
        };
    DSLContext dsl =
        DSL.using(new DefaultConfiguration().set(SQLDialect.POSTGRES).set(() -> tenantSchema));
    Lease lease = lease("invoice-7", "a#1", 3);

    assertThat(sent(dsl, fence.advanceStatement(dsl, lease))).contains("\"tenant_a\".\"fences\"");
    tenant.set("tenant_b");
    assertThat(sent(dsl, fence.advanceStatement(dsl, lease)))
        .contains("\"tenant_b\".\"fences\"")
        .doesNotContain("tenant_a");
  }
}
