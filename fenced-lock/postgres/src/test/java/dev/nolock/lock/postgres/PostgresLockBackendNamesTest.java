package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.FencingToken;
import java.lang.reflect.Proxy;
import java.time.Duration;
import javax.sql.DataSource;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Test;

/**
 * The backend validates lock names and owners itself, called directly (not through the facade),
 * before anything is sent: its data source fails any call.
 */
class PostgresLockBackendNamesTest {

  private static final Duration TTL = Duration.ofSeconds(30);
  private static final FencingToken TOKEN = FencingToken.of(1);

  private final PostgresLockBackend backend = PostgresLockBackend.create(unreachable());

  @Test
  void badLockNamesAreRefusedByEveryCall() {
    for (String name : new String[] {null, "", " ", "a\nb", "a\uD800", "x".repeat(256)}) {
      refused(() -> backend.tryAcquire(name, "A", TTL), "lock name");
      refused(() -> backend.renew(name, "A", TOKEN, TTL), "lock name");
      refused(() -> backend.release(name, "A", TOKEN), "lock name");
      refused(() -> backend.holder(name), "lock name");
    }
  }

  @Test
  void badOwnersAreRefusedByEveryCall() {
    for (String owner : new String[] {null, "", "\t", "a\u0000b", "o".repeat(256)}) {
      refused(() -> backend.tryAcquire("invoice-42", owner, TTL), "lease owner");
      refused(() -> backend.renew("invoice-42", owner, TOKEN, TTL), "lease owner");
      refused(() -> backend.release("invoice-42", owner, TOKEN), "lease owner");
    }
  }

  private static void refused(ThrowingCallable call, String what) {
    assertThatThrownBy(call)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(what);
  }

  /** A data source that fails every call: a refused name must never reach it. */
  private static DataSource unreachable() {
    return (DataSource)
        Proxy.newProxyInstance(
            DataSource.class.getClassLoader(),
            new Class<?>[] {DataSource.class},
            (proxy, method, args) -> {
              throw new AssertionError("the database was reached: " + method.getName());
            });
  }
}
