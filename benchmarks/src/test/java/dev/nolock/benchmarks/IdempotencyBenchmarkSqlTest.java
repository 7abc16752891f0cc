package dev.nolock.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.idempotency.IdempotencyConfig;
import dev.nolock.idempotency.internal.KeyTable;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.tools.jdbc.MockConnection;
import org.jooq.tools.jdbc.MockResult;
import org.junit.jupiter.api.Test;

/**
 * The raw-JDBC floor of {@link IdempotencyBenchmark} must send the library's claim, takeover
 * included, or it measures another statement: the SQL jOOQ renders for the claim on the default
 * table is captured through jOOQ's mock connection, no server needed.
 */
class IdempotencyBenchmarkSqlTest {

  @Test
  void theRawClaimIsTheOneTheLibrarySends() {
    List<String> sent = new CopyOnWriteArrayList<>();
    MockConnection connection =
        new MockConnection(
            context -> {
              sent.add(context.sql());
              return new MockResult[] {
                new MockResult(0, DSL.using(SQLDialect.POSTGRES).newResult())
              };
            });

    new KeyTable(DSL.name(IdempotencyConfig.DEFAULT_TABLE))
        .claim(
            DSL.using(connection, SQLDialect.POSTGRES),
            IdempotencyBenchmark.SCOPE,
            IdempotencyBenchmark.ANONYMOUS,
            "k",
            IdempotencyBenchmark.FINGERPRINT,
            IdempotencyConfig.DEFAULT_LEASE,
            IdempotencyConfig.DEFAULT_RETENTION,
            true,
            5);

    assertThat(sent).containsExactly(IdempotencyBenchmark.CLAIM);
  }
}
