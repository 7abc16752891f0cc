package dev.nolock.lock.postgres.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.sql.RenderedStatement;
import java.time.Duration;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

/**
 * The statements of every lock cycle run from text rendered once ({@link RenderedStatement}); each
 * must send exactly what the statement built with the same values sends (a value passed in another
 * place would show here). A TTL with a fraction of a millisecond is rounded up in both.
 */
class LockTableSqlTest {

  private final DSLContext dsl = DSL.using(SQLDialect.POSTGRES);
  private final LockTable table = new LockTable(DSL.name("app", "locks"), DSL.name("app", "waits"));

  private String sent(org.jooq.Query query) {
    return RenderedStatement.sent(dsl, query);
  }

  private static Duration ttl() {
    return Duration.ofSeconds(1);
  }

  @Test
  void aLeaseThatIsNotPositiveIsRefusedAsWhenTheStatementIsBuilt() {
    for (Duration ttl : java.util.Arrays.asList(Duration.ZERO, Duration.ofMillis(-1), null)) {
      assertThatThrownBy(() -> table.tryAcquire(dsl, "n", "o", ttl))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("pass a positive duration");
      assertThatThrownBy(() -> table.renew(dsl, "n", "o", 1, ttl))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("pass a positive duration");
    }
  }

  @Test
  void theStatementsOfALockCycleRenderedOnceSendWhatTheBuiltStatementsSend() {
    for (Duration ttl : List.of(Duration.ofSeconds(10), Duration.ofNanos(2_000_001))) {
      assertThat(sent(table.tryAcquire(dsl, "invoice-7", "worker-a", ttl)))
          .isEqualTo(sent(table.builtTryAcquire(dsl, "invoice-7", "worker-a", ttl)));
      assertThat(sent(table.renew(dsl, "invoice-7", "worker-a", 41, ttl)))
          .isEqualTo(sent(table.builtRenew(dsl, "invoice-7", "worker-a", 41, ttl)));
    }
    assertThat(sent(table.release(dsl, "invoice-7", "worker-a", 41, "nolock_locks")))
        .isEqualTo(sent(table.builtRelease(dsl, "invoice-7", "worker-a", 41, "nolock_locks")));
    assertThat(sent(table.releaseWithoutQueue(dsl, "invoice-7", "worker-a", 41)))
        .isEqualTo(sent(table.builtReleaseWithoutQueue(dsl, "invoice-7", "worker-a", 41)));
    assertThat(table.tryAcquire(dsl, "n", "o", ttl()).fields())
        .extracting(f -> (Object) f.getType())
        .containsExactly(Long.class);
  }
}
