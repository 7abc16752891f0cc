package dev.nolock.lock.etcd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.FencingToken;
import dev.nolock.testkit.EtcdExtension;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.options.GetOption;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The etcd backend validates lock names and owners itself, called directly (not through the
 * facade), and two applications with different prefixes never share a key.
 */
@ExtendWith(EtcdExtension.class)
class EtcdLockBackendNamesIT {

  private static final Duration TTL = Duration.ofSeconds(30);
  private static final FencingToken TOKEN = FencingToken.of(1);

  private final Client client;
  private final String prefix =
      "/nolock-test/" + UUID.randomUUID().toString().substring(0, 8) + "/";
  private final EtcdLockBackend backend;

  EtcdLockBackendNamesIT(Client client) {
    this.client = client;
    this.backend =
        EtcdLockBackend.create(client, EtcdLockConfig.custom().keyPrefix(prefix).build());
  }

  @Test
  void badLockNamesAreRefusedByEveryCallAndNothingIsWritten() throws Exception {
    for (String name : new String[] {"", " ", "a\nb", "x".repeat(256)}) {
      refused(() -> backend.tryAcquire(name, "A", TTL), "lock name");
      refused(() -> backend.renew(name, "A", TOKEN, TTL), "lock name");
      refused(() -> backend.release(name, "A", TOKEN), "lock name");
      refused(() -> backend.holder(name), "lock name");
    }
    assertThat(keysUnder(prefix)).isZero();
  }

  @Test
  void badOwnersAreRefusedByEveryCallAndNothingIsWritten() throws Exception {
    for (String owner : new String[] {"", "\t", "a\u0000b", "o".repeat(256)}) {
      refused(() -> backend.tryAcquire("invoice-42", owner, TTL), "lease owner");
      refused(() -> backend.renew("invoice-42", owner, TOKEN, TTL), "lease owner");
      refused(() -> backend.release("invoice-42", owner, TOKEN), "lease owner");
    }
    assertThat(keysUnder(prefix)).isZero();
  }

  @Test
  void aValidNameAndOwnerAreGranted() throws Exception {
    FencingToken token = backend.tryAcquire("invoice-42", "A", TTL).get();

    assertThat(keysUnder(prefix)).isOne();
    assertThat(backend.release("invoice-42", "A", token)).isTrue();
  }

  @Test
  void applicationsWithNestedPrefixesNeverShareALock() {
    EtcdLockBackend billing =
        EtcdLockBackend.create(
            client, EtcdLockConfig.custom().keyPrefix(prefix + "billing/").build());

    FencingToken outer = backend.tryAcquire("billing/invoice-42", "A", TTL).get();

    assertThat(billing.tryAcquire("invoice-42", "B", TTL).isDefined())
        .as("another application's lock of another name")
        .isTrue();
    assertThat(backend.holder("billing/invoice-42").get().token()).isEqualTo(outer);
  }

  private static void refused(ThrowingCallable call, String what) {
    assertThatThrownBy(call)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining(what);
  }

  private long keysUnder(String keyPrefix) throws Exception {
    ByteSequence key = ByteSequence.from(keyPrefix, StandardCharsets.UTF_8);
    return client
        .getKVClient()
        .get(key, GetOption.builder().isPrefix(true).withCountOnly(true).build())
        .get(5, TimeUnit.SECONDS)
        .getCount();
  }
}
