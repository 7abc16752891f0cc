package dev.nolock.lock.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.dynamodb.DynamoDbFence;
import dev.nolock.dynamodb.DynamoDbFenceConfig;
import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.patterns.Lease;
import dev.nolock.testkit.DynamoDbExtension;
import dev.nolock.testkit.Endpoints;
import dev.nolock.testkit.PausableHolder;
import dev.nolock.testkit.PauseScenario;
import dev.nolock.testkit.Protection;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

/**
 * The pause test on the DynamoDB backend: holders in child JVMs, frozen with SIGSTOP between their
 * point-of-no-return check and their write; each next holder (a new process, so a new observer)
 * takes over only after watching the frozen holder's rvn for a full lease duration; the frozen
 * holders are resumed after the new holder has written the item through the {@link DynamoDbFence}.
 */
@ExtendWith(DynamoDbExtension.class)
class DynamoDbPauseIT {

  private static final String ENDPOINT_PROPERTY = "nolock.pause.dynamodbEndpoint";
  private static final String LOCK_TABLE_PROPERTY = "nolock.pause.lockTable";
  private static final String DATA_TABLE_PROPERTY = "nolock.pause.dataTable";

  private static DynamoDbClient dynamo;
  private static String endpoint;
  private static String lockTable;
  private static String dataTable;

  @BeforeAll
  static void createTables(DynamoDbClient client) {
    dynamo = client;
    endpoint = Endpoints.fromEnvironment().dynamoDbEndpoint();
    lockTable = LockTables.backendOnNewTable(dynamo, "nolock_pause_locks_").config().tableName();
    dataTable = LockTables.unique("nolock_pause_data_");
    LockTables.createDataTable(dynamo, dataTable);
  }

  @AfterAll
  static void dropTables() {
    LockTables.drop(dynamo, lockTable);
    LockTables.drop(dynamo, dataTable);
  }

  /** A correctness holder on the DynamoDB backend that writes one item per lock. */
  public static final class Holder implements PausableHolder {
    private final DynamoDbClient client;
    private final FencedLock locks;
    private final DynamoDbFence fence;
    private final String dataTable;

    /** The child JVM's constructor: settings come from system properties. */
    public Holder() {
      this(
          System.getProperty(ENDPOINT_PROPERTY),
          System.getProperty(LOCK_TABLE_PROPERTY),
          System.getProperty(DATA_TABLE_PROPERTY));
    }

    Holder(String endpoint, String lockTable, String dataTable) {
      this.dataTable = dataTable;
      this.client = DynamoDbExtension.newClient(endpoint);
      this.locks =
          FencedLock.create(
              DynamoDbLockBackend.create(
                  client, DynamoDbLockBackendConfig.custom().tableName(lockTable).build()),
              LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
      this.fence = DynamoDbFence.create(client, DynamoDbFenceConfig.custom(dataTable).build());
    }

    @Override
    public Lease acquireAndCheck(String lockName, Duration ttl, Duration maxWait) {
      HeldLock held =
          locks
              .acquire(lockName, ttl, maxWait)
              .getOrElseThrow(n -> new IllegalStateException("not acquired: " + n));
      held.checkPointOfNoReturn(Duration.ofMillis(50));
      return held.lease();
    }

    @Override
    public boolean write(Lease lease, String value, Protection protection) {
      Map<String, AttributeValue> key = key(lease.name());
      Map<String, AttributeValue> data = Map.of("value", AttributeValue.fromS(value));
      if (protection == Protection.UNFENCED) {
        client.putItem(
            put ->
                put.tableName(dataTable)
                    .item(Map.of("pk", key.get("pk"), "value", data.get("value"))));
        return true;
      }
      return fence.put(lease, key, data).isRight();
    }

    @Override
    public Option<String> read(String lockName) {
      Map<String, AttributeValue> item =
          client
              .getItem(get -> get.tableName(dataTable).key(key(lockName)).consistentRead(true))
              .item();
      return Option.of(item.get("value")).flatMap(v -> Option.of(v.s()));
    }

    private static Map<String, AttributeValue> key(String lockName) {
      return Map.of("pk", AttributeValue.fromS(lockName));
    }

    @Override
    public void close() {
      locks.close();
      client.close();
    }
  }

  private PauseScenario scenario() {
    return PauseScenario.builder(Holder.class)
        .pausedHolders(2)
        .childSystemProperty(ENDPOINT_PROPERTY, endpoint)
        .childSystemProperty(LOCK_TABLE_PROPERTY, lockTable)
        .childSystemProperty(DATA_TABLE_PROPERTY, dataTable)
        .build();
  }

  @Test
  void staleWritesOfHoldersFrozenBetweenCheckAndWriteAreAllRefused() throws Exception {
    try (Holder newHolder = new Holder(endpoint, lockTable, dataTable)) {
      PauseScenario.Result result = scenario().run(newHolder, "pause-fenced", Protection.FENCED);
      System.out.println("DynamoDB lock, fenced:\n" + result.timeline());

      assertThat(result.newHolderAccepted()).isTrue();
      assertThat(result.pausedWrites()).hasSize(2);
      for (PauseScenario.PausedWrite stale : result.pausedWrites()) {
        assertThat(stale.attempted()).as("the stale write went out").isTrue();
        assertThat(stale.accepted()).as("and was refused").isFalse();
        assertThat(result.newHolderLease().token().isNewerThan(stale.token())).isTrue();
      }
      result.auditor().assertNoStaleWriteAccepted();
      assertThat(result.finalValue().toJavaOptional()).contains("new-holder");
    }
  }

  @Test
  void negativeControlWithoutTheFenceTheAuditorReportsTheLostUpdate() throws Exception {
    try (Holder newHolder = new Holder(endpoint, lockTable, dataTable)) {
      PauseScenario.Result result =
          scenario().run(newHolder, "pause-unfenced", Protection.UNFENCED);
      System.out.println("DynamoDB lock, unfenced (negative control):\n" + result.timeline());

      assertThat(result.pausedWrites()).allMatch(PauseScenario.PausedWrite::accepted);
      assertThatThrownBy(() -> result.auditor().assertNoStaleWriteAccepted())
          .isInstanceOf(AssertionError.class)
          .hasMessageContaining("Lost update");
      assertThat(result.finalValue().toJavaOptional()).isNotEqualTo(Optional.of("new-holder"));
    }
  }
}
