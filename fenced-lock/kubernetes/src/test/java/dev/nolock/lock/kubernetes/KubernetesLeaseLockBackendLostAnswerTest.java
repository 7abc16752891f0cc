package dev.nolock.lock.kubernetes;

import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.LockBackendLostAnswerContract;
import io.fabric8.kubernetes.api.model.coordination.v1.Lease;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseSpec;
import io.fabric8.kubernetes.client.KubernetesClient;
import io.fabric8.kubernetes.client.http.HttpRequest;
import io.fabric8.kubernetes.client.utils.Serialization;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.Locale;
import java.util.function.Predicate;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;

/**
 * The lost-answer contract on fabric8's mock API server in CRUD mode: the one write of each call (a
 * create or update of the Lease) loses its request, or its answer after the server applied it,
 * through {@link KubernetesFaults} below fabric8's retry, which then resends it.
 *
 * <p>{@link #backend()} and {@link #faultyBackend()} are the same instance: only the instance that
 * made a grant renews it, and a contender's takeover waits on that instance's own observation of
 * the Lease (so {@link #awaitExpiry} waits on it too). Its path is clean except for the one armed
 * request, and a fault fires before its {@code meanwhile} runs. {@link #peek} reads through a
 * second instance, as in {@link KubernetesLeaseLockBackendTest}.
 */
class KubernetesLeaseLockBackendLostAnswerTest extends LockBackendLostAnswerContract {

  private static CrudMockApiServer server;
  private static KubernetesLeaseLockConfig config;
  private static KubernetesLeaseLockBackend peeker;

  private final KubernetesFaults faults = new KubernetesFaults();
  private final KubernetesClient client = faults.client(server.client());
  private final KubernetesLeaseLockBackend backend =
      KubernetesLeaseLockBackend.create(client, config);

  @BeforeAll
  static void start() {
    server = CrudMockApiServer.start();
    config = KubernetesLeaseLockConfig.custom().namespace(CrudMockApiServer.NAMESPACE).build();
    peeker = KubernetesLeaseLockBackend.create(server.client(), config);
  }

  @AfterAll
  static void stop() {
    server.close();
  }

  @AfterEach
  void closeClient() {
    client.close();
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
    return peeker.inspect(name);
  }

  @Override
  protected InjectedFault inject(Operation op, FaultKind kind, Runnable meanwhile) {
    return faults.onNext(
        switch (op) {
          case ACQUIRE ->
              write(
                  "the acquire's create or update of the Lease",
                  (method, spec) ->
                      method.equals("POST")
                          || (spec.getHolderIdentity() != null
                              && spec.getAcquireTime().equals(spec.getRenewTime())));
          case RENEW ->
              write(
                  "the renew's update of the Lease",
                  (method, spec) ->
                      method.equals("PUT")
                          && spec.getHolderIdentity() != null
                          && !spec.getAcquireTime().equals(spec.getRenewTime()));
          case RELEASE ->
              write(
                  "the release's update of the Lease",
                  (method, spec) -> method.equals("PUT") && spec.getHolderIdentity() == null);
        },
        kind,
        meanwhile);
  }

  /** A Lease name is lower-case letters, digits and '-': the contract's cases name fault kinds. */
  @Override
  protected String name(String test) {
    return super.name(test).toLowerCase(Locale.ROOT).replace('_', '-');
  }

  /** leaseDurationSeconds is whole seconds: the expiry tests' short TTL is one whole second. */
  @Override
  protected Duration shortTtl() {
    return Duration.ofSeconds(1);
  }

  private interface WriteTest {
    boolean test(String method, LeaseSpec spec);
  }

  private static Predicate<HttpRequest> write(String what, WriteTest test) {
    return new Predicate<>() {
      @Override
      public boolean test(HttpRequest request) {
        String method = request.method();
        if (!(method.equals("POST") || method.equals("PUT"))
            || !request.uri().getPath().contains("/leases")) {
          return false;
        }
        Lease lease = Serialization.unmarshal(request.bodyString(), Lease.class);
        return lease.getSpec() != null && test.test(method, lease.getSpec());
      }

      @Override
      public String toString() {
        return what;
      }
    };
  }
}
