package dev.nolock.lock.etcd;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.EtcdExtension;
import dev.nolock.testkit.LockBackendContract;
import dev.nolock.testkit.PeekedLease;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KeyValue;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The whole {@link LockBackendContract} against the real etcd, with a native peek. */
@ExtendWith(EtcdExtension.class)
class EtcdLockBackendIT extends LockBackendContract {

  private final Client client;
  private final EtcdLockBackend backend;

  EtcdLockBackendIT(Client client) {
    this.client = client;
    this.backend =
        EtcdLockBackend.create(
            client,
            EtcdLockConfig.custom()
                .keyPrefix("/nolock-test/" + UUID.randomUUID().toString().substring(0, 8) + "/")
                .build());
  }

  @Override
  protected LockBackend backend() {
    return backend;
  }

  @Override
  protected Optional<PeekedLease> peek(String name) {
    try {
      List<KeyValue> kvs =
          client
              .getKVClient()
              .get(bytes(backend.config().keyPrefix() + name))
              .get(5, TimeUnit.SECONDS)
              .getKvs();
      // etcd deletes the key when its lease expires: absent is expired.
      return kvs.stream()
          .findFirst()
          .map(
              kv ->
                  new PeekedLease(
                      kv.getValue().toString(StandardCharsets.UTF_8),
                      FencingToken.of(kv.getCreateRevision()),
                      false));
    } catch (Exception e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  protected Duration shortTtl() {
    return Duration.ofSeconds(1); // etcd leases are whole seconds with a minimum near 1.5 s
  }

  @Test
  void theTokenIsTheKeysCreateRevisionAndRisesAcrossOtherKeysToo() {
    FencingToken a = backend.tryAcquire(name("rev-a"), "A", ttl()).get();
    FencingToken b = backend.tryAcquire(name("rev-b"), "B", ttl()).get();

    assertThat(b.isNewerThan(a)).as("cluster-wide revisions").isTrue();
    assertThat(peek(name("rev-a")).get().token()).isEqualTo(a);
  }

  @Test
  void aRenewalWithALongerTtlRebindsTheKeyWithoutChangingItsToken() {
    String name = name("rebind");
    FencingToken a = backend.tryAcquire(name, "A", Duration.ofSeconds(2)).get();

    assertThat(backend.renew(name, "A", a, Duration.ofSeconds(30))).isTrue();

    assertThat(peek(name).get().token()).isEqualTo(a);
  }

  private static ByteSequence bytes(String s) {
    return ByteSequence.from(s, StandardCharsets.UTF_8);
  }
}
