package dev.nolock.lock.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.DynamoDbExtension;
import dev.nolock.testkit.LockBackendContract;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

/**
 * The whole {@link LockBackendContract} on dynalite, plus what is particular to the rvn lease: a
 * contender takes over only after a full stored lease duration without a heartbeat, measured on its
 * own (manual) clock; tokens rise across grants, releases and takeovers; the item layout.
 *
 * <p>The contract's {@link #peek} asks "has the lease expired?". DynamoDB stores no time, so the
 * answer comes from a second backend instance used only for peeking: it reports expired once it has
 * watched the same rvn for the full stored lease duration, which is exactly when a fresh contender
 * may take the lease over. No timestamp is read.
 */
@ExtendWith(DynamoDbExtension.class)
class DynamoDbLockBackendIT extends LockBackendContract {

  private static final Duration D = Duration.ofSeconds(30);

  private static DynamoDbClient dynamo;
  private static DynamoDbLockBackendConfig config;
  private static DynamoDbLockBackend backend;
  private static DynamoDbLockBackend peeker;

  @BeforeAll
  static void createTable(DynamoDbClient client) {
    dynamo = client;
    config =
        DynamoDbLockBackendConfig.custom().tableName(LockTables.unique("nolock_locks_")).build();
    backend = DynamoDbLockBackend.create(dynamo, config);
    assertThat(backend.createTableIfMissing()).isTrue();
    assertThat(backend.createTableIfMissing()).as("idempotent").isFalse();
    peeker = DynamoDbLockBackend.create(dynamo, config);
  }

  @AfterAll
  static void dropTable() {
    LockTables.drop(dynamo, config.tableName());
  }

  @Override
  protected LockBackend backend() {
    return backend;
  }

  @Override
  protected Option<ObservedLease> peek(String name) {
    return peeker.inspect(name);
  }

  /** A contender on the same table whose clock moves only when the test says so. */
  private static DynamoDbLockBackend contender(ManualLeaseClock clock) {
    return DynamoDbLockBackend.create(
        dynamo,
        DynamoDbLockBackendConfig.custom().tableName(config.tableName()).clock(clock).build());
  }

  @Test
  void aContenderTakesOverOnlyAfterAFullStoredLeaseDurationWithoutAHeartbeat() {
    String name = name("takeover");
    ManualLeaseClock clock = new ManualLeaseClock();
    DynamoDbLockBackend contender = contender(clock);
    FencingToken held = backend.tryAcquire(name, "holder", D).get();
    // The contender's own TTL plays no part: it waits the duration the holder stored.
    Duration contenderTtl = Duration.ofSeconds(1);

    assertThat(contender.tryAcquire(name, "contender", contenderTtl)).as("first sight").isEmpty();
    for (int beat = 1; beat <= 3; beat++) {
      clock.advance(D.plusSeconds(5));
      assertThat(backend.renew(name, "holder", held, D)).as("heartbeat %d", beat).isTrue();
      assertThat(contender.tryAcquire(name, "contender", contenderTtl))
          .as("a full duration passed on the contender's clock, but the rvn changed: start again")
          .isEmpty();
    }
    // The holder stops heartbeating.
    clock.advance(D.minusMillis(1));
    assertThat(contender.tryAcquire(name, "contender", contenderTtl)).as("D - 1 ms").isEmpty();
    assertThat(contender.inspect(name).get().waitLeft()).isEqualTo(Duration.ofMillis(1));

    clock.advance(Duration.ofMillis(1));
    FencingToken taken = contender.tryAcquire(name, "contender", contenderTtl).get();

    assertThat(taken.isNewerThan(held)).isTrue();
    assertThat(LockTables.item(dynamo, config, name))
        .containsEntry("owner", AttributeValue.fromS("contender"))
        .containsEntry("token", AttributeValue.fromN(Long.toString(taken.value())))
        .containsEntry("lease_duration_ms", AttributeValue.fromN("1000"));
    assertThat(backend.renew(name, "holder", held, D)).as("the old holder's heartbeat").isFalse();
  }

  @Test
  void theContenderWaitsTheDurationOfTheLatestHeartbeat() {
    String name = name("longer-heartbeat");
    ManualLeaseClock clock = new ManualLeaseClock();
    DynamoDbLockBackend contender = contender(clock);
    FencingToken held = backend.tryAcquire(name, "holder", D).get();
    assertThat(contender.tryAcquire(name, "contender", D)).isEmpty();

    Duration longer = D.multipliedBy(4);
    assertThat(backend.renew(name, "holder", held, longer)).isTrue();
    assertThat(contender.tryAcquire(name, "contender", D)).as("sees the new rvn").isEmpty();
    clock.advance(longer.minusMillis(1));
    assertThat(contender.tryAcquire(name, "contender", D)).as("4D - 1 ms").isEmpty();
    clock.advance(Duration.ofMillis(1));

    assertThat(contender.tryAcquire(name, "contender", D)).isNotEmpty();
  }

  @Test
  void aReleasedLeaseIsTakenAtOnceWithoutWaiting() {
    String name = name("released");
    DynamoDbLockBackend contender = contender(new ManualLeaseClock());
    FencingToken held = backend.tryAcquire(name, "holder", D).get();
    assertThat(contender.tryAcquire(name, "contender", D)).isEmpty();

    assertThat(backend.release(name, "holder", held)).isTrue();

    assertThat(contender.tryAcquire(name, "contender", D).get().isNewerThan(held)).isTrue();
  }

  @Test
  void tokensStrictlyIncreaseAcrossGrantsReleasesAndTakeovers() {
    String name = name("tokens");
    ManualLeaseClock clock = new ManualLeaseClock();
    DynamoDbLockBackend other = contender(clock);
    List<FencingToken> tokens = new ArrayList<>();
    for (int round = 0; round < 3; round++) {
      FencingToken a = backend.tryAcquire(name, "A", D).get();
      tokens.add(a);
      assertThat(backend.release(name, "A", a)).isTrue();
      FencingToken b = other.tryAcquire(name, "B", D).get();
      tokens.add(b);
      // B is never renewed: once B's duration has passed on its instance's (manual) clock, C takes
      // the lease over through the same instance.
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
    assertThat(LockTables.item(dynamo, config, name))
        .containsEntry("token", AttributeValue.fromN(Long.toString(tokens.get(8).value())));
  }

  @Test
  void theLeaseItemHoldsOwnerRvnDurationAndTokenAndAReleaseKeepsTheCounter() {
    String name = name("schema");
    FencingToken token = backend.tryAcquire(name, "worker-7", Duration.ofMillis(1500)).get();
    Map<String, AttributeValue> held = LockTables.item(dynamo, config, name);

    assertThat(backend.release(name, "worker-7", token)).isTrue();
    Map<String, AttributeValue> released = LockTables.item(dynamo, config, name);

    assertThat(held)
        .containsOnlyKeys("lock_name", "owner", "rvn", "lease_duration_ms", "token", "released")
        .containsEntry("lock_name", AttributeValue.fromS(name))
        .containsEntry("owner", AttributeValue.fromS("worker-7"))
        .containsEntry("lease_duration_ms", AttributeValue.fromN("1500"))
        .containsEntry("token", AttributeValue.fromN(Long.toString(token.value())))
        .containsEntry("released", AttributeValue.fromBool(false));
    assertThat(UUID.fromString(held.get("rvn").s())).isNotNull();
    assertThat(released)
        .containsEntry("released", AttributeValue.fromBool(true))
        .containsEntry("token", AttributeValue.fromN(Long.toString(token.value())));
    assertThat(released.get("rvn")).as("a release writes a new rvn").isNotEqualTo(held.get("rvn"));
    assertThat(backend.tryAcquire(name, "worker-8", Duration.ofSeconds(1)).get().value())
        .isEqualTo(token.value() + 1);
  }

  @Test
  void aRenewalWritesANewRvnAndFailsOnceTheRvnWasChangedByAnyoneElse() {
    String name = name("renew-rvn");
    FencingToken token = backend.tryAcquire(name, "A", D).get();
    String acquired = LockTables.item(dynamo, config, name).get("rvn").s();

    assertThat(backend.renew(name, "A", token, D.plus(D))).isTrue();
    Map<String, AttributeValue> renewed = LockTables.item(dynamo, config, name);
    LockTables.overwriteRvn(dynamo, config, name, "written-by-someone-else");

    assertThat(renewed.get("rvn").s()).isNotEqualTo(acquired);
    assertThat(renewed).containsEntry("lease_duration_ms", AttributeValue.fromN("60000"));
    assertThat(backend.renew(name, "A", token, D)).isFalse();
    assertThat(LockTables.item(dynamo, config, name))
        .as("the refused renewal changed nothing")
        .containsEntry("rvn", AttributeValue.fromS("written-by-someone-else"));
    assertThat(backend.renew(name, "A", token, D)).as("the grant is forgotten").isFalse();
  }

  @Test
  void onlyTheInstanceThatMadeAGrantCanRenewItButAnyCanReleaseIt() {
    String name = name("other-instance");
    DynamoDbLockBackend other = DynamoDbLockBackend.create(dynamo, config);
    FencingToken token = backend.tryAcquire(name, "A", D).get();

    assertThat(other.renew(name, "A", token, D))
        .as("it does not know the grant's last rvn")
        .isFalse();
    assertThat(other.release(name, "A", token)).as("owner and token suffice").isTrue();
    assertThat(backend.renew(name, "A", token, D)).isFalse();
  }

  @Test
  void aContenderWaitsTheHoldersWholeTtlNotItsWholeMilliseconds() {
    String name = name("sub-millisecond");
    ManualLeaseClock clock = new ManualLeaseClock();
    DynamoDbLockBackend contender = contender(clock);
    Duration ttl = Duration.ofMillis(1500).plusNanos(400_000);
    backend.tryAcquire(name, "holder", ttl).get();
    assertThat(contender.tryAcquire(name, "contender", D)).as("first sight").isEmpty();

    clock.advance(Duration.ofMillis(1500));

    assertThat(contender.tryAcquire(name, "contender", D))
        .as("the holder counts 1500.4 ms: a contender that watched 1500 ms may not take over")
        .isEmpty();
    assertThat(LockTables.item(dynamo, config, name))
        .as("the stored duration is the TTL rounded up to whole milliseconds")
        .containsEntry("lease_duration_ms", AttributeValue.fromN("1501"));
    clock.advance(Duration.ofMillis(1));
    assertThat(contender.tryAcquire(name, "contender", D)).isNotEmpty();
  }

  @Test
  void anAcquireByTheGrantThatHoldsTheLeaseReturnsItsTokenAndGrantsNothingNew() {
    String name = name("same-grant");
    ManualLeaseClock clock = new ManualLeaseClock();
    DynamoDbLockBackend contender = contender(clock);
    FencingToken token = backend.tryAcquire(name, "A#grant-1", D).get();
    assertThat(contender.tryAcquire(name, "B", D)).as("B starts watching").isEmpty();
    String rvn = LockTables.item(dynamo, config, name).get("rvn").s();

    Option<FencingToken> again = backend.tryAcquire(name, "A#grant-1", D);

    assertThat(again).as("the same grant, asked again: its own token").contains(token);
    assertThat(LockTables.item(dynamo, config, name))
        .containsEntry("token", AttributeValue.fromN(Long.toString(token.value())))
        .containsEntry("owner", AttributeValue.fromS("A#grant-1"));
    assertThat(LockTables.item(dynamo, config, name).get("rvn").s())
        .as("the lease was refreshed, so a contender's watch starts again")
        .isNotEqualTo(rvn);
    clock.advance(D);
    assertThat(contender.tryAcquire(name, "B", D)).as("B saw a new rvn: it waits again").isEmpty();
    assertThat(backend.tryAcquire(name, "A#grant-2", D)).as("another grant").isEmpty();
    assertThat(backend.renew(name, "A#grant-1", token, D)).isTrue();
    assertThat(backend.release(name, "A#grant-1", token)).isTrue();
  }

  @Test
  void aMissingTableIsAnErrorThatSaysHowToCreateIt() {
    String missing = LockTables.unique("nolock_missing_");
    DynamoDbLockBackend nowhere =
        DynamoDbLockBackend.create(
            dynamo, DynamoDbLockBackendConfig.custom().tableName(missing).build());

    assertThatThrownBy(() -> nowhere.tryAcquire("x", "A", D))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(missing)
        .hasMessageContaining("createTableIfMissing()");
  }

  @Test
  void anItemOfAnotherShapeIsReportedAsMisconfiguration() {
    String name = name("foreign");
    dynamo.putItem(
        put ->
            put.tableName(config.tableName())
                .item(
                    Map.of(
                        "lock_name", AttributeValue.fromS(name),
                        "owner", AttributeValue.fromS("someone"))));

    assertThatThrownBy(() -> backend.tryAcquire(name, "A", D))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("not written by DynamoDbLockBackend");
  }

  @Test
  void aBadTtlOrOwnerIsRefusedBeforeAnythingIsSent() {
    String name = name("bad-input");

    assertThatThrownBy(() -> backend.tryAcquire(name, "A", Duration.ofNanos(10)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("1 ms");
    assertThatThrownBy(() -> backend.tryAcquire(name, " ", D))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(LockTables.item(dynamo, config, name)).isEmpty();
  }
}
