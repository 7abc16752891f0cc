package dev.nolock.lock.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.testkit.DynamoDbExtension;
import dev.nolock.testkit.DynamoDbFaults;
import dev.nolock.testkit.FaultKind;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.UUID;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * {@link DynamoDbLockBackend} after a lost answer (the server applied the write, the client never
 * heard back) and a lost request, on dynalite through {@link DynamoDbFaults}: acquire, renew and
 * release report the truth or "unknown" ({@link BackendUnavailableException}); a lease whose grant
 * landed is never stranded, a renewal that landed never drops the lease, a release that landed is
 * never reported as a failure.
 *
 * <p>The backend under test sends through the faulty client; a second backend instance on a plain
 * client plays the other processes and peeks.
 */
@ExtendWith(DynamoDbExtension.class)
class DynamoDbLockBackendLostAnswerIT {

  private static final Duration TTL = Duration.ofSeconds(30);

  private static DynamoDbClient plain;
  private static DynamoDbLockBackendConfig config;
  private static DynamoDbLockBackend other;

  private DynamoDbFaults faults;
  private DynamoDbLockBackend backend;
  private String name;

  @BeforeAll
  static void createTable(DynamoDbClient client) {
    plain = client;
    config =
        DynamoDbLockBackendConfig.custom()
            .tableName(LockTables.unique("nolock_lost_locks_"))
            .build();
    DynamoDbLockBackend.create(plain, config).createTableIfMissing();
    other = DynamoDbLockBackend.create(plain, config);
  }

  @AfterAll
  static void dropTable() {
    LockTables.drop(plain, config.tableName());
  }

  @BeforeEach
  void faultyClient() {
    faults = DynamoDbFaults.create();
    backend = DynamoDbLockBackend.create(faults.client(), config);
    name = "lock-" + UUID.randomUUID();
  }

  @AfterEach
  void closeFaults() {
    faults.close();
  }

  @Test
  void anAcquireWhoseAnswerWasLostReturnsItsGrantInsteadOfStrandingIt() {
    DynamoDbFaults.Fault lost = faults.onNext("UpdateItem", FaultKind.ANSWER_LOST);

    Option<FencingToken> acquired = unknownAsNull(() -> backend.tryAcquire(name, "A", TTL));

    lost.assertRetried();
    LeaseHolder stored = other.inspect(name).get().holder().get();
    assertThat(stored.owner()).as("the grant landed").isEqualTo("A");
    assertThat(acquired == null ? "unknown" : acquired.isDefined() ? "granted" : "refused")
        .as("an acquire whose grant landed and whose answer was lost must not strand the lease")
        .isIn("granted", "unknown");
    if (acquired == null) {
      // The caller retries after "unknown": the same grant gets its stored lease back.
      acquired = backend.tryAcquire(name, "A", TTL);
    }
    assertThat(acquired).as("the stored grant's token").contains(stored.token());
    assertThat(backend.renew(name, "A", acquired.get(), TTL)).as("and it can renew it").isTrue();
  }

  @Test
  void anAcquireWhoseGrantLandedAndWasTakenOverBeforeTheResendIsUnknown() {
    ManualLeaseClock clock = new ManualLeaseClock();
    DynamoDbLockBackend slow =
        DynamoDbLockBackend.create(
            faults.client(),
            DynamoDbLockBackendConfig.custom().tableName(config.tableName()).clock(clock).build());
    ManualLeaseClock contenderClock = new ManualLeaseClock();
    DynamoDbLockBackend contender =
        DynamoDbLockBackend.create(
            plain,
            DynamoDbLockBackendConfig.custom()
                .tableName(config.tableName())
                .clock(contenderClock)
                .build());
    // A's grant lands; before its resend, a full TTL passes and B, having watched it, takes over.
    DynamoDbFaults.Fault lost =
        faults.onNext(
            "UpdateItem",
            FaultKind.ANSWER_LOST,
            () -> {
              assertThat(contender.tryAcquire(name, "B", TTL)).isEmpty();
              contenderClock.advance(TTL);
              clock.advance(TTL);
              contender.tryAcquire(name, "B", TTL).get();
            });

    Option<FencingToken> acquired = unknownAsNull(() -> slow.tryAcquire(name, "A", TTL));

    lost.assertRetried();
    assertThat(acquired == null ? "unknown" : acquired.isDefined() ? "granted" : "refused")
        .as("A's grant may have landed before B's takeover: unknown, not refused")
        .isEqualTo("unknown");
    assertThat(other.inspect(name).get().holder().get().owner()).isEqualTo("B");
  }

  @Test
  void aRenewalWhoseAnswerWasLostKeepsTheLease() {
    FencingToken token = backend.tryAcquire(name, "A", TTL).get();
    DynamoDbFaults.Fault lost = faults.onNext("UpdateItem", FaultKind.ANSWER_LOST);

    Boolean renewed = unknownAsNull(() -> backend.renew(name, "A", token, TTL));

    lost.assertRetried();
    assertThat(renewed == null ? "unknown" : renewed ? "renewed" : "lost")
        .as("a renewal that landed, its answer lost, must not report the lease lost")
        .isIn("renewed", "unknown");
    assertThat(backend.renew(name, "A", token, TTL)).as("the holder still holds it").isTrue();
    assertThat(other.inspect(name).get().holder().get().owner()).isEqualTo("A");
  }

  /**
   * Two renewals of one grant out at once (the watchdog's beside an extension): both read the
   * grant's last rvn, the second lands first and changes it. The first, resent after its request
   * was lost, is refused on the old rvn, but the lease is still this grant's: a false "lost" would
   * make the holder give up a lease it holds.
   */
  @Test
  void aRenewalRefusedBecauseAnotherRenewalOfTheSameGrantChangedTheRvnStillRenews() {
    FencingToken token = backend.tryAcquire(name, "A", TTL).get();
    DynamoDbFaults.Fault lost =
        faults.onNext(
            "UpdateItem",
            FaultKind.REQUEST_LOST,
            () -> assertThat(backend.renew(name, "A", token, TTL)).as("the other one").isTrue());

    Boolean renewed = unknownAsNull(() -> backend.renew(name, "A", token, TTL));

    lost.assertRetried();
    assertThat(renewed == null ? "unknown" : renewed ? "renewed" : "lost")
        .as("the lease is still this grant's: renewed, or at worst unknown")
        .isIn("renewed", "unknown");
    assertThat(backend.renew(name, "A", token, TTL)).as("the holder still holds it").isTrue();
  }

  /**
   * The same two renewals with different lengths: the longer one (an extension to a minute) lands
   * first, the shorter one (the watchdog's 3 s) is tried again on its rvn and lands last, so the
   * server keeps 3 s. The backend must count 3 s too: after them the grant has ended, and a release
   * answers false. Before the fix it kept the minute and answered true.
   */
  @Test
  void theRenewalThatLandsLastDecidesWhenTheGrantEnds() {
    ManualLeaseClock clock = new ManualLeaseClock();
    DynamoDbLockBackend holder =
        DynamoDbLockBackend.create(
            faults.client(),
            DynamoDbLockBackendConfig.custom().tableName(config.tableName()).clock(clock).build());
    FencingToken token = holder.tryAcquire(name, "A", TTL).get();
    Duration minute = Duration.ofMinutes(1);
    Duration watchdog = Duration.ofSeconds(3);
    faults.onNext(
        "UpdateItem",
        FaultKind.REQUEST_LOST,
        () -> assertThat(holder.renew(name, "A", token, minute)).as("the extension").isTrue());

    Boolean renewed = unknownAsNull(() -> holder.renew(name, "A", token, watchdog));
    assertThat(renewed).as("the watchdog's renewal, landed last").isNotEqualTo(Boolean.FALSE);
    clock.advance(watchdog.plusMillis(1));

    assertThat(holder.release(name, "A", token))
        .as("the server kept 3 s after the last renewal: the grant has ended")
        .isFalse();
  }

  /**
   * A lease whose holder's deadline passed (its renewals failed in an outage) is released by the
   * facade anyway, so that the next holder need not watch it for a full lease: the answer is false
   * (it had expired), and the item is freed all the same.
   */
  @Test
  void aReleaseAfterTheDeadlineAnswersFalseAndStillFreesTheItem() {
    ManualLeaseClock clock = new ManualLeaseClock();
    DynamoDbLockBackend holder =
        DynamoDbLockBackend.create(
            plain,
            DynamoDbLockBackendConfig.custom().tableName(config.tableName()).clock(clock).build());
    FencingToken token = holder.tryAcquire(name, "A", TTL).get();
    clock.advance(TTL);

    assertThat(holder.release(name, "A", token)).as("expired: not released by this call").isFalse();
    assertThat(other.inspect(name).get().isFree()).as("but the item is free for the next").isTrue();
    assertThat(holder.release(name, "A", token)).as("asked again").isFalse();
  }

  @Test
  void aReleaseWhoseAnswerWasLostReportsTheRelease() {
    FencingToken token = backend.tryAcquire(name, "A", TTL).get();
    DynamoDbFaults.Fault lost = faults.onNext("UpdateItem", FaultKind.ANSWER_LOST);

    Boolean released = unknownAsNull(() -> backend.release(name, "A", token));

    lost.assertRetried();
    assertThat(released == null ? "unknown" : released ? "released" : "not released")
        .as("a release that landed, its answer lost, is reported as released or unknown")
        .isIn("released", "unknown");
    assertThat(other.inspect(name).get().isFree()).isTrue();
    assertThat(other.tryAcquire(name, "B", TTL)).as("free at once").isNotEmpty();
  }

  @Test
  void aReleaseWhoseAnswerWasLostWhileTheNextHolderTookTheLeaseIsUnknown() {
    FencingToken token = backend.tryAcquire(name, "A", TTL).get();
    // B takes the released lease at once, between A's lost answer and A's resend.
    DynamoDbFaults.Fault lost =
        faults.onNext(
            "UpdateItem", FaultKind.ANSWER_LOST, () -> other.tryAcquire(name, "B", TTL).get());

    Boolean released = unknownAsNull(() -> backend.release(name, "A", token));

    lost.assertRetried();
    assertThat(released == null ? "unknown" : released ? "released" : "not released")
        .as("A's release landed before B took the lease: released or unknown, not a failure")
        .isIn("released", "unknown");
    assertThat(other.inspect(name).get().holder().get().owner()).isEqualTo("B");
  }

  @Test
  void lostRequestsAreResentByTheLibrary() {
    DynamoDbFaults.Fault acquireLost = faults.onNext("UpdateItem", FaultKind.REQUEST_LOST);
    FencingToken token = backend.tryAcquire(name, "A", TTL).get();
    DynamoDbFaults.Fault renewLost = faults.onNext("UpdateItem", FaultKind.REQUEST_LOST);
    boolean renewed = backend.renew(name, "A", token, TTL);
    DynamoDbFaults.Fault releaseLost = faults.onNext("UpdateItem", FaultKind.REQUEST_LOST);
    boolean released = backend.release(name, "A", token);

    acquireLost.assertRetried();
    renewLost.assertRetried();
    releaseLost.assertRetried();
    assertThat(renewed).isTrue();
    assertThat(released).isTrue();
    assertThat(other.tryAcquire(name, "B", TTL).get().isNewerThan(token)).isTrue();
  }

  /** The call's answer, or null when it threw {@link BackendUnavailableException}. */
  private static <T> T unknownAsNull(Supplier<T> call) {
    try {
      return call.get();
    } catch (BackendUnavailableException unknown) {
      return null;
    }
  }
}
