package dev.nolock.lock.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.FencingToken;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.TcpProxy;
import io.fabric8.kubernetes.api.model.coordination.v1.Lease;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseBuilder;
import io.fabric8.kubernetes.client.Config;
import io.fabric8.kubernetes.client.ConfigBuilder;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.KubernetesClientBuilder;
import io.fabric8.kubernetes.client.KubernetesClientException;
import io.fabric8.kubernetes.client.http.BasicBuilder;
import io.fabric8.kubernetes.client.http.HttpRequest;
import io.fabric8.kubernetes.client.http.Interceptor;
import io.vavr.control.Option;
import java.net.URI;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * A write whose answer is lost on the wire: {@link TcpProxy} sits between the fabric8 client and
 * the mock API server (plain HTTP, so the proxy sees the bytes), lets the create or update through,
 * discards the server's answer and drops the connection. fabric8 8 then resends the same request on
 * a new connection (it retries any request after an {@code IOException}), and the resend meets the
 * first send's own write as 409. The backend must report the grant it made, not "not acquired".
 *
 * <p>The proxy is armed from a fabric8 {@link Interceptor} at the moment the write is sent (after
 * the call's read has been answered), so the answer it discards is the write's, and nothing else
 * crosses the proxy while it is armed. Every test asserts that its fault fired and that fabric8
 * really sent the write twice.
 */
class KubernetesLeaseLockTcpProxyTest {

  private static final Duration TTL = Duration.ofSeconds(30);
  private static final KubernetesLeaseLockConfig CONFIG = config(Clock.systemUTC());

  private static CrudMockApiServer server;
  private static TcpProxy proxy;

  private final ArmAtWrite armer = new ArmAtWrite();
  private final KubernetesClient proxied = proxiedClient(armer);

  @BeforeAll
  static void start() {
    server = CrudMockApiServer.start();
    URI api = URI.create(server.client().getConfiguration().getMasterUrl());
    assertThat(api.getScheme()).as("a TCP proxy needs the mock's plain HTTP").isEqualTo("http");
    proxy = TcpProxy.start("127.0.0.1", api.getPort());
  }

  @AfterAll
  static void stop() {
    proxy.close();
    server.close();
  }

  @AfterEach
  void closeClient() {
    proxied.close();
  }

  /** A client to the mock API server through the proxy, resending quickly after a lost answer. */
  private static KubernetesClient proxiedClient(Interceptor interceptor) {
    Config config =
        new ConfigBuilder(server.client().getConfiguration())
            .withMasterUrl("http://127.0.0.1:" + proxy.port() + "/")
            .withRequestRetryBackoffInterval(10)
            .withRequestRetryBackoffLimit(3)
            .withRequestTimeout(10_000)
            .build();
    return new KubernetesClientBuilder()
        .withConfig(config)
        .withHttpClientBuilderConsumer(http -> http.addOrReplaceInterceptor("arm", interceptor))
        .build();
  }

  private static KubernetesLeaseLockConfig config(Clock wallClock) {
    return KubernetesLeaseLockConfig.custom()
        .namespace(CrudMockApiServer.NAMESPACE)
        .wallClock(wallClock)
        .build();
  }

  private static String name(String what) {
    return what + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  /** The Lease as stored, read past the proxy. */
  private static Lease stored(String name) {
    return server.lease(CONFIG.leaseName(name));
  }

  /**
   * Arms {@link TcpProxy#loseNext} when the next create or update of a Lease is sent, and records
   * every create or update sent (fabric8's resends included).
   */
  private static final class ArmAtWrite implements Interceptor {
    final List<String> writes = new CopyOnWriteArrayList<>();
    final AtomicReference<Supplier<InjectedFault>> pending = new AtomicReference<>();
    final AtomicReference<InjectedFault> fault = new AtomicReference<>();

    void armAtNextWrite(FaultKind kind, Runnable meanwhile) {
      pending.set(() -> proxy.loseNext(kind, meanwhile));
    }

    InjectedFault fault() {
      InjectedFault armed = fault.get();
      assertThat(armed).as("a fault armed at a write").isNotNull();
      return armed;
    }

    @Override
    public void before(BasicBuilder builder, HttpRequest request, RequestTags tags) {
      String method = request.method();
      if ((method.equals("POST") || method.equals("PUT"))
          && request.uri().getPath().contains("/leases")) {
        writes.add(method);
        Supplier<InjectedFault> arm = pending.getAndSet(null);
        if (arm != null) {
          fault.set(arm.get());
        }
      }
    }
  }

  @Test
  void aCreateWhoseAnswerWasDroppedIsResentAndReportedAsTheGrantItWas() {
    KubernetesLeaseLockBackend backend = KubernetesLeaseLockBackend.create(proxied, CONFIG);
    String name = name("create");
    AtomicReference<Lease> meanwhile = new AtomicReference<>();
    armer.armAtNextWrite(FaultKind.ANSWER_LOST, () -> meanwhile.set(stored(name)));

    Option<FencingToken> granted = backend.tryAcquire(name, "A", TTL);

    armer.fault().assertFired();
    assertThat(meanwhile.get()).as("the Lease while the answer was lost").isNotNull();
    assertThat(meanwhile.get().getSpec().getHolderIdentity()).isEqualTo("A");
    assertThat(armer.writes).as("the create and fabric8's resend").containsExactly("POST", "POST");
    assertThat(granted).as("the outcome of a create that landed").contains(FencingToken.of(1));
    assertThat(backend.renew(name, "A", FencingToken.of(1), TTL)).as("its renewal").isTrue();
  }

  @Test
  void anUpdateWhoseAnswerWasDroppedIsResentAndReportedAsTheGrantItWas() {
    KubernetesLeaseLockBackend backend = KubernetesLeaseLockBackend.create(proxied, CONFIG);
    String name = name("update");
    backend.release(name, "A", backend.tryAcquire(name, "A", TTL).get());
    armer.writes.clear();
    AtomicReference<Lease> meanwhile = new AtomicReference<>();
    armer.armAtNextWrite(FaultKind.ANSWER_LOST, () -> meanwhile.set(stored(name)));

    Option<FencingToken> granted = backend.tryAcquire(name, "B", TTL);

    armer.fault().assertFired();
    assertThat(meanwhile.get().getSpec().getHolderIdentity())
        .as("the Lease while the answer was lost")
        .isEqualTo("B");
    assertThat(armer.writes).as("the update and fabric8's resend").containsExactly("PUT", "PUT");
    assertThat(granted).as("the outcome of an update that landed").contains(FencingToken.of(2));
    assertThat(backend.renew(name, "B", FencingToken.of(2), TTL)).as("its renewal").isTrue();
  }

  /**
   * Negative control: the same fault under a plain fabric8 call. Without the backend's re-read, the
   * caller is told 409 for a create and an update that both landed.
   */
  @Test
  void withoutTheReReadTheResendAnswers409ForWritesThatLanded() {
    String name = name("raw");
    Lease lease =
        new LeaseBuilder()
            .withNewMetadata()
            .withName(CONFIG.leaseName(name))
            .withNamespace(CrudMockApiServer.NAMESPACE)
            .endMetadata()
            .withNewSpec()
            .withHolderIdentity("A")
            .withLeaseTransitions(1)
            .endSpec()
            .build();
    var leases = proxied.leases().inNamespace(CrudMockApiServer.NAMESPACE);

    armer.armAtNextWrite(FaultKind.ANSWER_LOST, () -> {});
    assertThatThrownBy(() -> leases.resource(lease).create())
        .isInstanceOfSatisfying(
            KubernetesClientException.class, e -> assertThat(e.getCode()).isEqualTo(409));
    armer.fault().assertFired();
    assertThat(stored(name).getSpec().getHolderIdentity()).isEqualTo("A");

    Lease taken =
        new LeaseBuilder(stored(name))
            .editSpec()
            .withHolderIdentity("B")
            .withLeaseTransitions(2)
            .endSpec()
            .build();
    armer.armAtNextWrite(FaultKind.ANSWER_LOST, () -> {});
    assertThatThrownBy(() -> leases.resource(taken).update())
        .isInstanceOfSatisfying(
            KubernetesClientException.class, e -> assertThat(e.getCode()).isEqualTo(409));
    armer.fault().assertFired();
    assertThat(stored(name).getSpec().getHolderIdentity()).isEqualTo("B");
    assertThat(armer.writes).containsExactly("POST", "POST", "PUT", "PUT");
  }

  /**
   * A 409 whose re-read shows this owner and token is not always this call's write: here another
   * call of the same owner (a lost write of an earlier call, delivered late, plays the same part)
   * takes the Lease between this call's read and its write, and both calls' wall clocks read the
   * same instant (a coarse or stopped clock). Only a mark of this very attempt tells them apart.
   *
   * <p>Before the mark, the backend matched the re-read Lease on owner, token and the {@code
   * acquireTime} this call sent, and this test failed with {@code [the call whose write never
   * landed] Expecting empty but was: Some(FencingToken[2])}. The negative control at the end
   * applies that old rule to the Lease as stored: it matches, though this call's write never
   * landed.
   */
  @Test
  void anotherCallsWriteOfTheSameOwnerIsNotTakenForThisCallsOwn() {
    Clock stopped = Clock.fixed(Instant.parse("2026-11-30T02:00:00Z"), ZoneOffset.UTC);
    KubernetesLeaseLockBackend caller = KubernetesLeaseLockBackend.create(proxied, config(stopped));
    KubernetesLeaseLockBackend other =
        KubernetesLeaseLockBackend.create(server.client(), config(stopped));
    String name = name("same-owner");
    other.release(name, "A", other.tryAcquire(name, "A", TTL).get());
    armer.writes.clear();
    AtomicReference<Option<FencingToken>> othersGrant = new AtomicReference<>();
    armer.armAtNextWrite(
        FaultKind.REQUEST_LOST, () -> othersGrant.set(other.tryAcquire(name, "A", TTL)));

    Option<FencingToken> granted = caller.tryAcquire(name, "A", TTL);

    armer.fault().assertFired();
    assertThat(othersGrant.get()).as("the other call's grant").contains(FencingToken.of(2));
    assertThat(armer.writes)
        .as("the lost update and fabric8's resend")
        .containsExactly("PUT", "PUT");
    assertThat(granted).as("the call whose write never landed").isEmpty();

    // Negative control: owner, token and acquireTime (what the call wrote, on its stopped clock)
    // all match the other call's write; only the mark differs.
    Lease found = stored(name);
    assertThat(found.getSpec().getHolderIdentity()).isEqualTo("A");
    assertThat(found.getSpec().getLeaseTransitions()).isEqualTo(2);
    assertThat(found.getSpec().getAcquireTime().toInstant()).isEqualTo(stopped.instant());
    assertThat(found.getMetadata().getAnnotations())
        .containsKey(KubernetesLeaseLockBackend.ATTEMPT_ANNOTATION);
  }
}
