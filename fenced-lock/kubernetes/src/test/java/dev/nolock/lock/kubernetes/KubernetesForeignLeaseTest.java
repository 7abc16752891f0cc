package dev.nolock.lock.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.patterns.ObservedLease;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseBuilder;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseSpec;
import io.fabric8.kubernetes.api.model.coordination.v1.LeaseSpecBuilder;
import io.vavr.control.Option;
import java.time.Duration;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.NullSource;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * Leases this backend did not write (client-go's leader election, {@code kubectl create}): the
 * observers, {@link KubernetesLeaseLockBackend#inspect} and {@link
 * KubernetesLeaseLockBackend#holder}, report what is stored and never throw for a Lease they can
 * read (a dashboard, an elector's {@code onNewLeader} call them), while {@code tryAcquire} keeps
 * its documented behaviour on the same Lease.
 */
class KubernetesForeignLeaseTest {

  private static final Duration D = Duration.ofSeconds(15);

  /** The wait reported for a Lease whose end nobody can tell: longer than anyone waits. */
  private static final Duration NO_KNOWN_END = Duration.ofNanos(Long.MAX_VALUE);

  private static CrudMockApiServer server;
  private static KubernetesLeaseLockConfig config;

  @BeforeAll
  static void start() {
    server = CrudMockApiServer.start();
    config = KubernetesLeaseLockConfig.custom().namespace(CrudMockApiServer.NAMESPACE).build();
  }

  @AfterAll
  static void stop() {
    server.close();
  }

  private static String name(String what) {
    return what + "-" + UUID.randomUUID().toString().substring(0, 8);
  }

  /** A process whose monotonic clock moves only when told to. */
  private static KubernetesLeaseLockBackend observer(ManualLeaseClock clock) {
    return KubernetesLeaseLockBackend.create(
        server.client(),
        KubernetesLeaseLockConfig.custom()
            .namespace(CrudMockApiServer.NAMESPACE)
            .clock(clock)
            .build());
  }

  /** Creates the Lease of {@code name} with exactly {@code spec}, as another tool would. */
  private static void createByHand(String name, LeaseSpec spec) {
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
                .withSpec(spec)
                .build())
        .create();
  }

  private static LeaseSpec spec(String name) {
    return server.lease(config.leaseName(name)).getSpec();
  }

  /**
   * client-go writes {@code leaseTransitions} 0 for its first holder; a Lease made by hand may have
   * none (or a negative one). {@code tryAcquire} counts on from 0 (its takeover writes 1), so the
   * holder is reported with token 1, the lowest there is: never above a grant of this backend.
   */
  @ParameterizedTest(name = "leaseTransitions {0}")
  @NullSource
  @ValueSource(ints = {0, -3})
  void aHolderWithoutATokenIsReportedWithTheLowestTokenWhileHeldAndOnceExpired(
      Integer transitions) {
    String name = name("client-go");
    createByHand(
        name,
        new LeaseSpecBuilder()
            .withHolderIdentity("client-go-pod")
            .withLeaseDurationSeconds((int) D.toSeconds())
            .withLeaseTransitions(transitions)
            .withAcquireTime(ZonedDateTime.now(ZoneOffset.UTC))
            .withRenewTime(ZonedDateTime.now(ZoneOffset.UTC))
            .build());
    ManualLeaseClock clock = new ManualLeaseClock();
    KubernetesLeaseLockBackend observer = observer(clock);
    LeaseHolder reported = new LeaseHolder("client-go-pod", FencingToken.of(1));

    ObservedLease held = observer.inspect(name).get();

    assertThat(held.holder()).containsExactly(reported);
    assertThat(held.waitLeft()).isEqualTo(D);
    assertThat(held.leaseDuration()).containsExactly(D);
    assertThat(observer.holder(name)).containsExactly(reported);

    clock.advance(D);
    ObservedLease expired = observer.inspect(name).get();

    assertThat(expired.isExpired()).isTrue();
    assertThat(expired.holder()).as("an expired Lease still names its holder").contains(reported);
    assertThat(observer.holder(name)).as("no live holder").isEmpty();
    FencingToken taken = observer.tryAcquire(name, "A", D).get();
    assertThat(taken.value()).as("tryAcquire counts on from 0").isEqualTo(1);
    assertThat(spec(name).getHolderIdentity()).isEqualTo("A");
  }

  /** The reported case: an observer that has watched such a Lease expire asks who holds it. */
  @Test
  void anObserverThatWatchedAHolderWithoutATokenExpireReadsItWithoutThrowing() {
    String name = name("client-go-expired");
    createByHand(
        name,
        new LeaseSpecBuilder()
            .withHolderIdentity("client-go-pod")
            .withLeaseDurationSeconds((int) D.toSeconds())
            .withLeaseTransitions(0)
            .build());
    ManualLeaseClock clock = new ManualLeaseClock();
    KubernetesLeaseLockBackend contender = observer(clock);
    assertThat(contender.tryAcquire(name, "A", D)).as("first sight").isEmpty();
    clock.advance(D);

    assertThat(contender.holder(name)).isEmpty();
    assertThat(contender.inspect(name).get().holder())
        .containsExactly(new LeaseHolder("client-go-pod", FencingToken.of(1)));
  }

  /**
   * A held Lease without a positive {@code leaseDurationSeconds} (or with one longer than any lease
   * duration this backend can watch out) has no end anyone can tell, and {@code tryAcquire} refuses
   * it with an error naming the remedy. Observers report it held, with the longest wait, by every
   * observer and however long it watches: never expired, since nobody could take it over.
   */
  @ParameterizedTest(name = "leaseDurationSeconds {0}")
  @NullSource
  @ValueSource(ints = {0, -1, 8 * 24 * 60 * 60})
  void aHolderWithoutAUsableDurationIsReportedHeldForeverAndTryAcquireStillRefusesIt(
      Integer seconds) {
    String name = name("no-duration");
    createByHand(
        name,
        new LeaseSpecBuilder()
            .withHolderIdentity("someone")
            .withLeaseDurationSeconds(seconds)
            .withLeaseTransitions(7)
            .build());
    ManualLeaseClock clock = new ManualLeaseClock();
    KubernetesLeaseLockBackend observer = observer(clock);
    LeaseHolder reported = new LeaseHolder("someone", FencingToken.of(7));

    ObservedLease seen = observer.inspect(name).get();
    clock.advance(Deadline.MAX_LEASE_DURATION.multipliedBy(2));
    ObservedLease later = observer.inspect(name).get();

    for (ObservedLease lease : new ObservedLease[] {seen, later}) {
      assertThat(lease.holder()).containsExactly(reported);
      assertThat(lease.isExpired()).isFalse();
      assertThat(lease.waitLeft()).isEqualTo(NO_KNOWN_END);
    }
    assertThat(seen.leaseDuration())
        .isEqualTo(Option.of(seconds).map(s -> Duration.ofSeconds(Math.max(0, s))));
    assertThat(observer.holder(name)).containsExactly(reported);
    assertThatThrownBy(() -> observer.tryAcquire(name, "A", D))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("\"someone\"")
        .hasMessageContaining("leaseDurationSeconds")
        .hasMessageContaining("another leaseNamePrefix");
    assertThat(spec(name).getHolderIdentity()).as("nothing written").isEqualTo("someone");
  }

  /** Neither a token nor a duration: both rules at once. */
  @Test
  void aHolderWithNothingButItsIdentityIsReportedHeld() {
    String name = name("bare");
    createByHand(name, new LeaseSpecBuilder().withHolderIdentity("someone").build());
    KubernetesLeaseLockBackend observer = observer(new ManualLeaseClock());

    ObservedLease seen = observer.inspect(name).get();

    assertThat(seen.holder()).containsExactly(new LeaseHolder("someone", FencingToken.of(1)));
    assertThat(seen.leaseDuration()).isEmpty();
    assertThat(seen.waitLeft()).isEqualTo(NO_KNOWN_END);
    assertThat(observer.holder(name)).isNotEmpty();
  }

  /** An empty {@code holderIdentity} is no holder, for client-go and for this backend alike. */
  @Test
  void anEmptyHolderIdentityIsAFreeLeaseTakenAtOnce() {
    String name = name("empty-holder");
    createByHand(name, new LeaseSpecBuilder().withHolderIdentity("").build());
    KubernetesLeaseLockBackend observer = observer(new ManualLeaseClock());

    ObservedLease seen = observer.inspect(name).get();

    assertThat(seen.isFree()).isTrue();
    assertThat(seen.waitLeft()).isZero();
    assertThat(seen.leaseDuration()).isEmpty();
    assertThat(observer.holder(name)).isEmpty();
    assertThat(observer.tryAcquire(name, "A", D).get().value()).isEqualTo(1);
  }

  /** {@code renewTime} and {@code acquireTime} are for people and tools; nothing reads them. */
  @Test
  void aHeldLeaseWithoutRenewTimeIsReadAsAnyOther() {
    String name = name("no-renew-time");
    createByHand(
        name,
        new LeaseSpecBuilder()
            .withHolderIdentity("someone")
            .withLeaseDurationSeconds((int) D.toSeconds())
            .withLeaseTransitions(4)
            .build());
    ManualLeaseClock clock = new ManualLeaseClock();
    KubernetesLeaseLockBackend observer = observer(clock);
    LeaseHolder reported = new LeaseHolder("someone", FencingToken.of(4));

    assertThat(observer.inspect(name).get().holder()).containsExactly(reported);
    assertThat(observer.inspect(name).get().waitLeft()).isEqualTo(D);
    assertThat(observer.holder(name)).containsExactly(reported);
    clock.advance(D);
    assertThat(observer.holder(name)).isEmpty();
    assertThat(observer.tryAcquire(name, "A", D).get().value()).isEqualTo(5);
  }
}
