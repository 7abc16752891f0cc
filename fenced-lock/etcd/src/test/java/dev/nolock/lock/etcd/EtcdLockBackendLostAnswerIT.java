package dev.nolock.lock.etcd;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.lock.etcd.EtcdFaults.Request;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.Endpoints;
import dev.nolock.testkit.EtcdExtension;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.LockBackendLostAnswerContract;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.api.Compare;
import io.etcd.jetcd.api.RequestOp;
import io.etcd.jetcd.api.TxnRequest;
import io.etcd.jetcd.options.LeaseOption;
import io.vavr.control.Option;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The lost-answer contract against the real etcd: the one gRPC call that carries each operation's
 * effect is lost before etcd sees it, or after etcd applied it, by {@link EtcdFaults} below jetcd's
 * retry (jetcd resends neither a transaction nor a {@code keepAliveOnce}; see there).
 *
 * <p>{@link #backend()} and {@link #faultyBackend()} are the same {@link EtcdLockBackend}: only the
 * instance that acquired a grant knows its etcd lease, so a renew through another instance would
 * answer {@code false} before sending anything. Its path is clean except for the one armed message,
 * and a fault fires before its {@code meanwhile} runs.
 */
@ExtendWith(EtcdExtension.class)
class EtcdLockBackendLostAnswerIT extends LockBackendLostAnswerContract {

  private final Client client;
  private final EtcdFaults faults = new EtcdFaults(Endpoints.fromEnvironment());
  private final EtcdLockBackend backend;

  EtcdLockBackendLostAnswerIT(Client client) {
    this.client = client;
    this.backend =
        EtcdLockBackend.create(
            faults.client(),
            EtcdLockConfig.custom()
                .keyPrefix("/nolock-test/" + UUID.randomUUID().toString().substring(0, 8) + "/")
                // The caller waits while a fault's meanwhile waits out a lease: longer than that.
                .rpcTimeout(Duration.ofSeconds(15))
                .build());
  }

  @AfterEach
  void closeClient() {
    faults.close();
  }

  @Override
  protected LockBackend backend() {
    return backend;
  }

  @Override
  protected LockBackend faultyBackend() {
    return backend;
  }

  @Override
  protected Option<ObservedLease> peek(String name) {
    return EtcdLockBackendIT.peek(client, backend.config().lockKey(name));
  }

  @Override
  protected InjectedFault inject(Operation op, FaultKind kind, Runnable meanwhile) {
    return switch (op) {
      case ACQUIRE -> faults.onNext(ACQUIRE_TXN, kind, meanwhile);
      case RENEW -> faults.onNext(KEEP_ALIVE.or(REBIND_TXN), kind, meanwhile);
      case RELEASE -> faults.onNext(RELEASE_TXN, kind, meanwhile);
    };
  }

  /** A TTL of 1 s: etcd's whole seconds, which it raises to its minimum. */
  @Override
  protected Duration shortTtl() {
    return Duration.ofSeconds(1);
  }

  /**
   * etcd raises a TTL to its minimum lease TTL, ceil(1.5 × election timeout) = 2 s with default
   * timing (1 s over a 1 s TTL), and finds expired leases every 500 ms.
   */
  @Override
  protected Duration serverSlack() {
    return Duration.ofMillis(1500);
  }

  @ParameterizedTest(name = "{displayName} [{0}]")
  @EnumSource(FaultKind.class)
  void aRenewForTheSameTtlUnderAFaultAnswersTrueOrUnknownNeverFalse(FaultKind kind) {
    // The contract's renew of a standing grant changes the TTL (a re-bind); this one keeps it, so
    // its effect is the keepAliveOnce of the grant's own lease.
    String name = name("keep-alive-" + kind);
    FencingToken a = backend.tryAcquire(name, "A", ttl()).get();
    InjectedFault fault = faults.onNext(KEEP_ALIVE, kind, () -> {});

    Optional<Boolean> answer = renew(name, a, ttl());

    fault.assertFired();
    assertThat(answer)
        .as(
            "A's renew of its standing grant, whose keepAliveOnce lost its %s (empty: unknown)",
            kind == FaultKind.ANSWER_LOST ? "answer" : "request")
        .isNotEqualTo(Optional.of(false));
    assertThat(liveHolder(name)).as("A's grant").contains(new LeaseHolder("A", a));
    assertThat(backend.renew(name, "A", a, ttl())).as("A's next renew, without a fault").isTrue();
  }

  @Test
  void aRenewTrueAfterAReBindWhoseAnswerWasLostKeepsTheKeyForItsWholeTtl() throws Exception {
    String name = name("rebind-lost");
    FencingToken a = backend.tryAcquire(name, "A", ttl()).get();
    InjectedFault fault = faults.onNext(REBIND_TXN, FaultKind.ANSWER_LOST, () -> {});

    // etcd re-binds the key to a new 1 s lease; its answer is lost.
    assertThat(renew(name, a, shortTtl()))
        .as("the re-bind whose answer was lost (true or unknown)")
        .isNotEqualTo(Optional.of(false));

    fault.assertFired();
    assertThat(renew(name, a, ttl())).as("A's next renew, for %s", ttl()).contains(true);
    assertThat(
            client
                .getLeaseClient()
                .timeToLive(keyLease(name), LeaseOption.DEFAULT)
                .get(5, TimeUnit.SECONDS)
                .getGrantedTTL())
        .as("the TTL of the lease the key lives on, after A's renew for %s answered true", ttl())
        .isEqualTo(ttl().getSeconds());
  }

  @Test
  void aRenewAfterALostReBindWhoseNewLeaseCouldNotBeRevokedIsNeverTrue() {
    String name = name("rebind-unrevoked");
    FencingToken a = backend.tryAcquire(name, "A", Duration.ofSeconds(30)).get();
    InjectedFault rebind = faults.onNext(REBIND_TXN, FaultKind.ANSWER_LOST, () -> {});
    InjectedFault check = faults.onNext(CHECK_TXN, FaultKind.REQUEST_LOST, () -> {});
    // jetcd resends a revoke twice (retryMaxAttempts): lose all three.
    List<InjectedFault> revokes =
        Stream.<InjectedFault>generate(
                () -> faults.onNext(REVOKE, FaultKind.REQUEST_LOST, () -> {}))
            .limit(3)
            .toList();

    // etcd re-binds the key to a new 5 s lease; the caller can neither learn it nor revoke it.
    assertThat(renew(name, a, Duration.ofSeconds(5))).as("the lost re-bind").isEmpty();

    rebind.assertFired();
    check.assertFired();
    revokes.forEach(InjectedFault::assertFired);
    assertThat(liveHolder(name))
        .as("the negative control: the key still stands, on the new lease")
        .contains(new LeaseHolder("A", a));
    assertThat(renew(name, a, Duration.ofSeconds(30)))
        .as("A's renew for 30 s of its old lease, while the key lives on the 5 s one")
        .isNotEqualTo(Optional.of(true));
  }

  /** A's renew: its answer, or empty for "outcome unknown". */
  private Optional<Boolean> renew(String name, FencingToken a, Duration ttl) {
    try {
      return Optional.of(backend.renew(name, "A", a, ttl));
    } catch (BackendUnavailableException unknown) {
      return Optional.empty();
    }
  }

  /** The holder of the unexpired lease of {@code name} that {@link #peek} shows, if any. */
  private Optional<LeaseHolder> liveHolder(String name) {
    return peek(name).flatMap(ObservedLease::liveHolder).toJavaOptional();
  }

  private long keyLease(String name) throws Exception {
    return client
        .getKVClient()
        .get(bytes(backend.config().lockKey(name)))
        .get(5, TimeUnit.SECONDS)
        .getKvs()
        .get(0)
        .getLease();
  }

  /** The acquire: put if the key's create revision is 0. */
  private static final Request ACQUIRE_TXN =
      Request.of(
          EtcdFaults.TXN,
          "acquire's put if absent",
          m -> puts(m) && comparesCreateRevision(m, true));

  /** A renew for the same TTL keeps the grant's lease alive. */
  private static final Request KEEP_ALIVE =
      Request.of(EtcdFaults.LEASE_KEEP_ALIVE, "renew's keepAliveOnce", m -> true);

  /** A renew for another TTL re-binds the key to a new lease if the create revision is ours. */
  private static final Request REBIND_TXN =
      Request.of(
          EtcdFaults.TXN,
          "renew's re-binding put",
          m -> puts(m) && comparesCreateRevision(m, false));

  /** The renew's read of the key: if the create revision and owner are ours, get it. */
  private static final Request CHECK_TXN =
      Request.of(
          EtcdFaults.TXN,
          "renew's check",
          m ->
              m instanceof TxnRequest txn
                  && txn.getSuccessList().stream().anyMatch(RequestOp::hasRequestRange));

  private static final Request REVOKE =
      Request.of(EtcdFaults.LEASE_REVOKE, "lease revoke", m -> true);

  private static final Request RELEASE_TXN =
      Request.of(
          EtcdFaults.TXN,
          "release's delete",
          m ->
              m instanceof TxnRequest txn
                  && txn.getSuccessList().stream().anyMatch(RequestOp::hasRequestDeleteRange));

  private static boolean puts(Object message) {
    return message instanceof TxnRequest txn
        && txn.getSuccessList().stream().anyMatch(RequestOp::hasRequestPut);
  }

  private static boolean comparesCreateRevision(Object message, boolean zero) {
    return ((TxnRequest) message)
        .getCompareList().stream()
            .anyMatch(
                c ->
                    c.getTarget() == Compare.CompareTarget.CREATE
                        && (c.getCreateRevision() == 0) == zero);
  }

  private static ByteSequence bytes(String s) {
    return ByteSequence.from(s, StandardCharsets.UTF_8);
  }
}
