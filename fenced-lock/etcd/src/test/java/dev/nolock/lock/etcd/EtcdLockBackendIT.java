package dev.nolock.lock.etcd;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.EtcdExtension;
import dev.nolock.testkit.LockBackendContract;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KeyValue;
import io.etcd.jetcd.lease.LeaseTimeToLiveResponse;
import io.etcd.jetcd.options.LeaseOption;
import io.vavr.control.Option;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
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
  protected Option<ObservedLease> peek(String name) {
    return peek(client, backend.config().lockKey(name));
  }

  /**
   * The lease stored at {@code key} (the owner as its value, the key's create revision as the
   * token, its mod revision as the version), expiry judged by etcd: the key is deleted when its
   * lease expires, so a key that is there is held. Its wait comes from the lease's remaining TTL,
   * which etcd truncates to whole seconds, rounded up; a key whose lease has just run out waits for
   * etcd's revoke, at least a moment more.
   */
  static Option<ObservedLease> peek(Client client, String key) {
    try {
      List<KeyValue> kvs = client.getKVClient().get(bytes(key)).get(5, TimeUnit.SECONDS).getKvs();
      if (kvs.isEmpty()) {
        return Option.none();
      }
      KeyValue kv = kvs.get(0);
      LeaseTimeToLiveResponse lease =
          client
              .getLeaseClient()
              .timeToLive(kv.getLease(), LeaseOption.DEFAULT)
              .get(5, TimeUnit.SECONDS);
      return Option.some(
          new ObservedLease(
              Option.some(
                  new LeaseHolder(
                      kv.getValue().toString(StandardCharsets.UTF_8),
                      FencingToken.of(kv.getCreateRevision()))),
              Option.some(Long.toString(kv.getModRevision())),
              Option.some(lease.getGrantedTTL())
                  .filter(seconds -> seconds > 0)
                  .map(Duration::ofSeconds),
              Duration.ofSeconds(Math.max(lease.getTTL(), 0) + 1)));
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
    assertThat(peek(name("rev-a")).get().holder().get().token()).isEqualTo(a);
  }

  @Test
  void aRenewalWithALongerTtlRebindsTheKeyWithoutChangingItsToken() {
    String name = name("rebind");
    FencingToken a = backend.tryAcquire(name, "A", Duration.ofSeconds(2)).get();

    assertThat(backend.renew(name, "A", a, Duration.ofSeconds(30))).isTrue();

    assertThat(peek(name).get().holder().get().token()).isEqualTo(a);
  }

  private static ByteSequence bytes(String s) {
    return ByteSequence.from(s, StandardCharsets.UTF_8);
  }
}
