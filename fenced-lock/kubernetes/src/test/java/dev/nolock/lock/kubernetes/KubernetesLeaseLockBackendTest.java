package dev.nolock.lock.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.LockBackendContract;
import io.fabric8.kubernetes.api.model.coordination.v1.Lease;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseBuilder;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseSpec;
import io.vavr.control.Option;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import java.time.temporal.ChronoUnit;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The whole {@link LockBackendContract} (including the 8-thread fuzz) on fabric8's mock API server
 * in CRUD mode, plus what is particular to the Lease backend: client-go's way of judging expiry on
 * the contender's own monotonic clock, {@code leaseTransitions} as the token bumped on every
 * acquisition, and the Lease's fields.
 *
 * <p>These tests are only meaningful because the mock refuses a write with a stale {@code
 * resourceVersion} with 409 ({@link MockApiServerRejectsStaleResourceVersionTest}; {@link
 * CrudMockApiServer#start()} checks it again): every grant, renewal and release of the backend is
 * such a conditional write.
 *
 * <p>The contract's {@link #peek} asks "has the lease expired?". A Lease stores no expiry that
 * anyone may compare with a local clock, so the answer comes from a second backend instance used
 * only for peeking: it reports expired once it has watched the same {@code resourceVersion} for the
 * Lease's own {@code leaseDurationSeconds}, which is exactly when a fresh contender may take it
 * over. {@code renewTime} is never read.
 */
class KubernetesLeaseLockBackendTest extends LockBackendContract {

  private static final Duration D = Duration.ofSeconds(30);

  private static CrudMockApiServer server;
  private static KubernetesLeaseLockConfig config;
  private static KubernetesLeaseLockBackend backend;
  private static KubernetesLeaseLockBackend peeker;

  @BeforeAll
  static void start() {
    server = CrudMockApiServer.start();
    config = KubernetesLeaseLockConfig.custom().namespace(CrudMockApiServer.NAMESPACE).build();
    backend = KubernetesLeaseLockBackend.create(server.client(), config);
    peeker = KubernetesLeaseLockBackend.create(server.client(), config);
  }

  @AfterAll
  static void stop() {
    server.close();
  }

  @Override
  protected LockBackend backend() {
    return backend;
  }

  @Override
  protected Option<ObservedLease> peek(String name) {
    return peeker.inspect(name);
  }

  /** leaseDurationSeconds is whole seconds: the expiry tests' short TTL is one whole second. */
  @Override
  protected Duration shortTtl() {
    return Duration.ofSeconds(1);
  }

  /** Another process's backend on the same API server, whose clock moves only when told to. */
  private static KubernetesLeaseLockBackend contender(ManualLeaseClock clock) {
    return KubernetesLeaseLockBackend.create(
        server.client(),
        KubernetesLeaseLockConfig.custom()
            .namespace(CrudMockApiServer.NAMESPACE)
            .clock(clock)
            .build());
  }

  private static LeaseSpec spec(String name) {
    return server.lease(config.leaseName(name)).getSpec();
  }

  @Test
  void aContenderTakesOverOnlyAfterTheLeasesOwnDurationWithoutAChangeOnItsOwnClock() {
    String name = name("takeover");
    ManualLeaseClock clock = new ManualLeaseClock();
    KubernetesLeaseLockBackend contender = contender(clock);
    FencingToken held = backend.tryAcquire(name, "holder", D).get();
    // The contender's own TTL plays no part: it waits the leaseDurationSeconds the holder stored.
    Duration contenderTtl = Duration.ofSeconds(1);

    assertThat(contender.tryAcquire(name, "contender", contenderTtl)).as("first sight").isEmpty();
    for (int beat = 1; beat <= 3; beat++) {
      clock.advance(D.plusSeconds(5));
      assertThat(backend.renew(name, "holder", held, D)).as("renewal %d", beat).isTrue();
      assertThat(contender.tryAcquire(name, "contender", contenderTtl))
          .as("a full duration passed on the contender's clock, but the Lease changed: start again")
          .isEmpty();
    }
    // The holder stops renewing.
    clock.advance(D.minusMillis(1));
    assertThat(contender.tryAcquire(name, "contender", contenderTtl)).as("D - 1 ms").isEmpty();
    assertThat(contender.inspect(name).get().waitLeft()).isEqualTo(Duration.ofMillis(1));

    clock.advance(Duration.ofMillis(1));
    FencingToken taken = contender.tryAcquire(name, "contender", contenderTtl).get();

    assertThat(taken.isNewerThan(held)).isTrue();
    assertThat(spec(name).getHolderIdentity()).isEqualTo("contender");
    assertThat(spec(name).getLeaseTransitions()).isEqualTo((int) taken.value());
    assertThat(spec(name).getLeaseDurationSeconds()).isEqualTo(1);
    assertThat(backend.renew(name, "holder", held, D)).as("the old holder's renewal").isFalse();
    assertThat(backend.release(name, "holder", held)).as("the old holder's release").isFalse();
    assertThat(spec(name).getHolderIdentity()).isEqualTo("contender");
  }

  @Test
  void theContenderWaitsTheDurationOfTheLatestRenewalNotItsOwnTtl() {
    String name = name("longer-renewal");
    ManualLeaseClock clock = new ManualLeaseClock();
    KubernetesLeaseLockBackend contender = contender(clock);
    FencingToken held = backend.tryAcquire(name, "holder", D).get();
    assertThat(contender.tryAcquire(name, "contender", D)).isEmpty();

    Duration longer = D.multipliedBy(4);
    assertThat(backend.renew(name, "holder", held, longer)).isTrue();
    assertThat(contender.tryAcquire(name, "contender", D)).as("sees the new version").isEmpty();
    clock.advance(longer.minusMillis(1));
    assertThat(contender.tryAcquire(name, "contender", D)).as("4D - 1 ms").isEmpty();
    clock.advance(Duration.ofMillis(1));

    assertThat(contender.tryAcquire(name, "contender", D)).isNotEmpty();
  }

  @Test
  void renewTimeIsNeverComparedWithTheLocalClock() {
    // Holders whose wall clocks are a day behind and a day ahead write renewTimes that a
    // wall-clock comparison would read as long expired or as valid for a day. Neither matters.
    Instant realNow = Instant.now().truncatedTo(ChronoUnit.MICROS);
    ManualLeaseClock clock = new ManualLeaseClock();
    KubernetesLeaseLockBackend contender = contender(clock);
    for (Duration skew : List.of(Duration.ofDays(-1), Duration.ofDays(1))) {
      String name = name("skew" + (skew.isNegative() ? "-behind" : "-ahead"));
      KubernetesLeaseLockBackend skewed =
          KubernetesLeaseLockBackend.create(
              server.client(),
              KubernetesLeaseLockConfig.custom()
                  .namespace(CrudMockApiServer.NAMESPACE)
                  .wallClock(Clock.fixed(realNow.plus(skew), ZoneOffset.UTC))
                  .build());
      FencingToken held = skewed.tryAcquire(name, "holder", D).get();
      assertThat(spec(name).getRenewTime().toInstant()).isEqualTo(realNow.plus(skew));

      assertThat(contender.tryAcquire(name, "contender", D)).as("first sight").isEmpty();
      clock.advance(D.minusMillis(1));
      assertThat(contender.tryAcquire(name, "contender", D)).as("D - 1 ms").isEmpty();
      clock.advance(Duration.ofMillis(1));
      assertThat(contender.tryAcquire(name, "contender", D).get().isNewerThan(held)).isTrue();
    }
  }

  @Test
  void everyAcquisitionBumpsLeaseTransitionsIncludingARetakeBySameIdentity() {
    String name = name("retake");
    FencingToken first = backend.tryAcquire(name, "A", D).get();
    assertThat(first.value()).as("a fresh Lease's first acquisition").isEqualTo(1);
    assertThat(backend.release(name, "A", first)).isTrue();

    FencingToken second = backend.tryAcquire(name, "A", D).get();

    assertThat(second.value()).as("same identity again after a release").isEqualTo(2);
    assertThat(spec(name).getLeaseTransitions()).isEqualTo(2);
    assertThat(backend.release(name, "A", first)).as("the first grant's stale release").isFalse();
    assertThat(spec(name).getHolderIdentity()).isEqualTo("A");

    // A re-take of an expired Lease by the same identity, through another instance.
    ManualLeaseClock clock = new ManualLeaseClock();
    KubernetesLeaseLockBackend sameIdentityElsewhere = contender(clock);
    assertThat(sameIdentityElsewhere.tryAcquire(name, "A", D)).as("not reentrant").isEmpty();
    clock.advance(D);
    FencingToken third = sameIdentityElsewhere.tryAcquire(name, "A", D).get();

    assertThat(third.value()).isEqualTo(3);
    assertThat(spec(name).getLeaseTransitions()).isEqualTo(3);
    assertThat(backend.renew(name, "A", second, D)).as("the expired grant's renewal").isFalse();
    assertThat(backend.release(name, "A", second)).as("the expired grant's release").isFalse();
    assertThat(sameIdentityElsewhere.renew(name, "A", third, D)).isTrue();
  }

  @Test
  void aReleasedLeaseIsTakenAtOnceWithoutWaiting() {
    String name = name("released");
    KubernetesLeaseLockBackend contender = contender(new ManualLeaseClock());
    FencingToken held = backend.tryAcquire(name, "holder", D).get();
    assertThat(contender.tryAcquire(name, "contender", D)).isEmpty();

    assertThat(backend.release(name, "holder", held)).isTrue();

    assertThat(contender.tryAcquire(name, "contender", D).get().isNewerThan(held)).isTrue();
  }

  @Test
  void tokensStrictlyIncreaseAcrossGrantsReleasesAndTakeovers() {
    String name = name("tokens");
    ManualLeaseClock clock = new ManualLeaseClock();
    KubernetesLeaseLockBackend other = contender(clock);
    List<FencingToken> tokens = new ArrayList<>();
    for (int round = 0; round < 3; round++) {
      FencingToken a = backend.tryAcquire(name, "A", D).get();
      tokens.add(a);
      assertThat(backend.release(name, "A", a)).isTrue();
      FencingToken b = other.tryAcquire(name, "B", D).get();
      tokens.add(b);
      // B is never renewed: once B's duration has passed on its instance's clock (counted from
      // when B's write was sent), C takes the Lease over through the same instance.
      assertThat(other.tryAcquire(name, "C", D)).as("B's lease is still running").isEmpty();
      clock.advance(D);
      FencingToken c = other.tryAcquire(name, "C", D).get();
      tokens.add(c);
      assertThat(other.release(name, "B", b)).as("B's stale release").isFalse();
      assertThat(other.release(name, "C", c)).isTrue();
    }

    assertThat(tokens)
        .hasSize(9)
        .isSortedAccordingTo(FencingToken::compareTo)
        .doesNotHaveDuplicates();
    assertThat(spec(name).getLeaseTransitions()).isEqualTo((int) tokens.get(8).value());
  }

  @Test
  void theLeaseHoldsHolderRoundedUpDurationAndTransitionsAndAReleaseKeepsTheCounter() {
    String name = name("schema");
    FencingToken token = backend.tryAcquire(name, "worker-7", Duration.ofMillis(1500)).get();
    Lease held = server.lease("nolock-" + name);

    assertThat(backend.release(name, "worker-7", token)).isTrue();
    Lease released = server.lease("nolock-" + name);

    assertThat(held.getMetadata().getNamespace()).isEqualTo(CrudMockApiServer.NAMESPACE);
    assertThat(held.getSpec().getHolderIdentity()).isEqualTo("worker-7");
    assertThat(held.getSpec().getLeaseDurationSeconds()).as("1.5 s rounded up").isEqualTo(2);
    assertThat(held.getSpec().getLeaseTransitions()).isEqualTo(1);
    assertThat(token.value()).isEqualTo(1);
    assertThat(held.getSpec().getAcquireTime()).isNotNull();
    assertThat(held.getSpec().getRenewTime()).isNotNull();
    assertThat(released).as("a release does not delete the Lease").isNotNull();
    assertThat(released.getSpec().getHolderIdentity()).isNull();
    assertThat(released.getSpec().getLeaseTransitions()).isEqualTo(1);
    assertThat(released.getMetadata().getResourceVersion())
        .isNotEqualTo(held.getMetadata().getResourceVersion());
    assertThat(backend.tryAcquire(name, "worker-8", Duration.ofSeconds(1)).get().value())
        .isEqualTo(2);
  }

  @Test
  void aRenewalFailsOnceSomeoneElseRewroteTheHolderAndWritesNothing() {
    String name = name("renew-foreign");
    FencingToken token = backend.tryAcquire(name, "A", D).get();
    Lease stored = server.lease(config.leaseName(name));
    server
        .client()
        .leases()
        .inNamespace(CrudMockApiServer.NAMESPACE)
        .resource(
            new LeaseBuilder(stored).editSpec().withHolderIdentity("intruder").endSpec().build())
        .update();
    String before = server.lease(config.leaseName(name)).getMetadata().getResourceVersion();

    assertThat(backend.renew(name, "A", token, D)).isFalse();

    assertThat(server.lease(config.leaseName(name)).getMetadata().getResourceVersion())
        .as("the refused renewal wrote nothing")
        .isEqualTo(before);
    assertThat(backend.renew(name, "A", token, D)).as("the grant is forgotten").isFalse();
  }

  @Test
  void anEditThatLeavesHolderAndTokenAloneDoesNotCostTheLease() {
    String name = name("renew-labelled");
    FencingToken token = backend.tryAcquire(name, "A", D).get();
    Lease stored = server.lease(config.leaseName(name));
    server
        .client()
        .leases()
        .inNamespace(CrudMockApiServer.NAMESPACE)
        .resource(
            new LeaseBuilder(stored)
                .editMetadata()
                .addToLabels("team", "billing")
                .endMetadata()
                .build())
        .update();

    assertThat(backend.renew(name, "A", token, D.multipliedBy(2))).isTrue();

    Lease renewed = server.lease(config.leaseName(name));
    assertThat(renewed.getMetadata().getLabels()).containsEntry("team", "billing");
    assertThat(renewed.getSpec().getLeaseDurationSeconds()).isEqualTo(60);
  }

  @Test
  void onlyTheInstanceThatMadeAGrantCanRenewItButAnyCanReleaseIt() {
    String name = name("other-instance");
    KubernetesLeaseLockBackend other = KubernetesLeaseLockBackend.create(server.client(), config);
    FencingToken token = backend.tryAcquire(name, "A", D).get();

    assertThat(other.renew(name, "A", token, D))
        .as("it cannot know whether the grant has expired")
        .isFalse();
    assertThat(other.release(name, "A", token)).as("owner and token suffice").isTrue();
    assertThat(backend.renew(name, "A", token, D)).isFalse();
  }

  @Test
  void aFreeLeaseCreatedBySomeoneElseIsTakenAndItsCounterContinues() {
    String name = name("precreated");
    server
        .client()
        .leases()
        .inNamespace(CrudMockApiServer.NAMESPACE)
        .resource(
            new LeaseBuilder()
                .withNewMetadata()
                .withName(config.leaseName(name))
                .withNamespace(CrudMockApiServer.NAMESPACE)
                .endMetadata()
                .withNewSpec()
                .withLeaseTransitions(41)
                .endSpec()
                .build())
        .create();

    assertThat(backend.tryAcquire(name, "A", D).get().value()).isEqualTo(42);
  }

  @Test
  void aHeldLeaseWithoutADurationIsReportedAsMisconfiguration() {
    String name = name("foreign");
    server
        .client()
        .leases()
        .inNamespace(CrudMockApiServer.NAMESPACE)
        .resource(
            new LeaseBuilder()
                .withNewMetadata()
                .withName(config.leaseName(name))
                .withNamespace(CrudMockApiServer.NAMESPACE)
                .endMetadata()
                .withNewSpec()
                .withHolderIdentity("someone")
                .endSpec()
                .build())
        .create();

    assertThatThrownBy(() -> backend.tryAcquire(name, "A", D))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("no positive leaseDurationSeconds");
  }

  @Test
  void badNamesAndTtlsAreRefusedBeforeAnythingIsSent() {
    assertThatThrownBy(() -> backend.tryAcquire("Invoice_42", "A", D))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("DNS-1123 subdomain")
        .hasMessageContaining("nolock-Invoice_42");
    assertThatThrownBy(() -> backend.tryAcquire("a".repeat(250), "A", D))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("253");
    assertThatThrownBy(() -> backend.tryAcquire(name("ttl"), "A", Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("whole seconds");
    assertThatThrownBy(() -> backend.tryAcquire(name("owner"), " ", D))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(server.lease(config.leaseName(name("ttl")))).isNull();
    assertThat(server.lease(config.leaseName(name("owner")))).isNull();
  }
}
