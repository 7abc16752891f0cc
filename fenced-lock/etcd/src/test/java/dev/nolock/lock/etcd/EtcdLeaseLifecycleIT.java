package dev.nolock.lock.etcd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.testkit.EtcdExtension;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KV;
import io.etcd.jetcd.Lease;
import io.etcd.jetcd.Txn;
import io.etcd.jetcd.lease.LeaseTimeToLiveResponse;
import io.etcd.jetcd.op.Op;
import io.etcd.jetcd.options.LeaseOption;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What becomes of a grant's own etcd lease, read on the real etcd with {@code LeaseTimeToLive}: the
 * TTL asked for, its revocation on every release (refused or failed too), and a renewal on an
 * interrupted thread. Faults are injected by a {@link Client} whose calls go to the real one except
 * for the one call a test arms.
 */
@ExtendWith(EtcdExtension.class)
class EtcdLeaseLifecycleIT {

  private static final Duration TTL = Duration.ofSeconds(30);

  private final Client client;
  private final String prefix =
      "/nolock-test/" + UUID.randomUUID().toString().substring(0, 8) + "/";
  private final AtomicBoolean failReleaseTxn = new AtomicBoolean();
  private final AtomicBoolean interruptAtKeepAlive = new AtomicBoolean();
  private final EtcdLockBackend backend;

  EtcdLeaseLifecycleIT(Client client) {
    this.client = client;
    this.backend =
        EtcdLockBackend.create(faulty(client), EtcdLockConfig.custom().keyPrefix(prefix).build());
  }

  @AfterEach
  void clearInterrupt() {
    Thread.interrupted();
  }

  @Test
  void theLeaseIsGrantedForTheTtlRoundedUpToWholeSeconds() throws Exception {
    backend.tryAcquire("exact", "A", Duration.ofSeconds(2)).get();
    backend.tryAcquire("above", "A", Duration.ofSeconds(2).plusNanos(1)).get();

    assertThat(timeToLive(leaseOf("exact")).getGrantedTTL()).as("exactly 2 s").isEqualTo(2);
    assertThat(timeToLive(leaseOf("above")).getGrantedTTL())
        .as("2 s + 1 ns must be granted 3 s: etcd must hold the lease as long as the holder counts")
        .isEqualTo(3);
  }

  @Test
  void aRefusedReleaseStillRevokesTheGrantsLease() throws Exception {
    FencingToken token = backend.tryAcquire("refused", "A", TTL).get();
    long lease = leaseOf("refused");
    // The key goes away without the lease (an operator's delete): A's release is refused.
    client
        .getKVClient()
        .delete(bytes(backend.config().lockKey("refused")))
        .get(5, TimeUnit.SECONDS);
    assertThat(timeToLive(lease).getTTL()).as("the negative control: still alive").isPositive();

    assertThat(backend.release("refused", "A", token)).isFalse();

    assertThat(timeToLive(lease).getTTL())
        .as("the grant's etcd lease after a refused release (-1: revoked)")
        .isEqualTo(-1);
    assertThat(backend.renew("refused", "A", token, TTL))
        .as("the grant is forgotten with its lease")
        .isFalse();
  }

  @Test
  void aFailedReleaseStillRevokesTheGrantsLeaseWhichDeletesTheKey() throws Exception {
    FencingToken token = backend.tryAcquire("failed", "A", TTL).get();
    long lease = leaseOf("failed");
    failReleaseTxn.set(true);

    assertThatThrownBy(() -> backend.release("failed", "A", token))
        .isInstanceOf(BackendUnavailableException.class);

    failReleaseTxn.set(false);
    assertThat(timeToLive(lease).getTTL())
        .as("the grant's etcd lease after a release that failed (-1: revoked)")
        .isEqualTo(-1);
    assertThat(backend.holder("failed")).as("the key went with its lease").isEmpty();
    assertThat(backend.tryAcquire("failed", "B", TTL)).isNotEmpty();
  }

  @Test
  void aReleaseThatSucceedsRevokesTheLeaseToo() throws Exception {
    FencingToken token = backend.tryAcquire("released", "A", TTL).get();
    long lease = leaseOf("released");

    assertThat(backend.release("released", "A", token)).isTrue();

    assertThat(timeToLive(lease).getTTL()).isEqualTo(-1);
  }

  @Test
  void aReleaseByAnotherOwnerLeavesTheHoldersLeaseAlone() throws Exception {
    FencingToken token = backend.tryAcquire("other-owner", "A", TTL).get();
    long lease = leaseOf("other-owner");

    assertThat(backend.release("other-owner", "B", token)).isFalse();

    assertThat(timeToLive(lease).getTTL()).isPositive();
    assertThat(backend.renew("other-owner", "A", token, TTL)).isTrue();
  }

  @Test
  void aRenewalInterruptedWhileWaitingForEtcdKeepsTheInterruptAndReportsUnavailable() {
    FencingToken token = backend.tryAcquire("interrupted", "A", TTL).get();
    interruptAtKeepAlive.set(true);

    assertThatThrownBy(() -> backend.renew("interrupted", "A", token, TTL))
        .isInstanceOf(BackendUnavailableException.class);

    assertThat(Thread.currentThread().isInterrupted())
        .as("the interrupt that cut the renewal short is still set on the caller's thread")
        .isTrue();
    Thread.interrupted();
    interruptAtKeepAlive.set(false);
    assertThat(backend.renew("interrupted", "A", token, TTL))
        .as("the grant is not taken for lost")
        .isTrue();
  }

  private long leaseOf(String name) throws Exception {
    return client
        .getKVClient()
        .get(bytes(backend.config().lockKey(name)))
        .get(5, TimeUnit.SECONDS)
        .getKvs()
        .get(0)
        .getLease();
  }

  private LeaseTimeToLiveResponse timeToLive(long lease) throws Exception {
    return client.getLeaseClient().timeToLive(lease, LeaseOption.DEFAULT).get(5, TimeUnit.SECONDS);
  }

  private static ByteSequence bytes(String s) {
    return ByteSequence.from(s, StandardCharsets.UTF_8);
  }

  /**
   * {@code real}, except: while {@link #failReleaseTxn} is set, a transaction with a delete (the
   * release's) fails without being sent; while {@link #interruptAtKeepAlive} is set, {@code
   * keepAliveOnce} interrupts the calling thread and never answers, as an interrupt arriving while
   * the caller waits for etcd.
   */
  private Client faulty(Client real) {
    Lease lease =
        proxy(
            Lease.class,
            (self, method, args) -> {
              if (method.getName().equals("keepAliveOnce") && interruptAtKeepAlive.get()) {
                Thread.currentThread().interrupt();
                return new CompletableFuture<>();
              }
              return invoke(method, real.getLeaseClient(), args);
            });
    KV kv =
        proxy(
            KV.class,
            (self, method, args) ->
                method.getName().equals("txn")
                    ? failingOnDelete((Txn) invoke(method, real.getKVClient(), args))
                    : invoke(method, real.getKVClient(), args));
    return proxy(
        Client.class,
        (self, method, args) ->
            switch (method.getName()) {
              case "getLeaseClient" -> lease;
              case "getKVClient" -> kv;
              default -> invoke(method, real, args);
            });
  }

  private Txn failingOnDelete(Txn real) {
    AtomicBoolean deletes = new AtomicBoolean();
    return proxy(
        Txn.class,
        (self, method, args) -> {
          if (method.getName().equals("Then")
              && args[0] instanceof Op[] ops
              && Arrays.stream(ops).anyMatch(op -> op instanceof Op.DeleteOp)) {
            deletes.set(true);
          }
          if (method.getName().equals("commit") && deletes.get() && failReleaseTxn.get()) {
            return CompletableFuture.failedFuture(new IllegalStateException("injected: etcd down"));
          }
          Object answer = invoke(method, real, args);
          return answer == real ? self : answer; // the builder's own steps stay on the proxy
        });
  }

  private interface Call {
    Object apply(Object self, Method method, Object[] args) throws Throwable;
  }

  @SuppressWarnings("unchecked")
  private static <T> T proxy(Class<T> type, Call call) {
    return (T) Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, call::apply);
  }

  private static Object invoke(Method method, Object target, Object[] args) throws Throwable {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }
}
