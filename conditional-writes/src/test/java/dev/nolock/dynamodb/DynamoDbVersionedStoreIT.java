package dev.nolock.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.patterns.VersionedStore;
import dev.nolock.testkit.DynamoDbExtension;
import dev.nolock.testkit.VersionedStoreContract;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.http.apache5.Apache5HttpClient;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

/**
 * The whole {@link VersionedStoreContract} on dynalite (including 8 writers × 500 increments of one
 * hot item and the blind read-then-write negative control), plus what is particular to DynamoDB:
 * the item layout, reserved-word attribute names, the metrics of a hot item, the give-up path and
 * the errors.
 */
@ExtendWith(DynamoDbExtension.class)
class DynamoDbVersionedStoreIT extends VersionedStoreContract {

  private static final String TABLE = DynamoDbTables.unique("nolock_store_");
  private static final String MISSING_TABLE = DynamoDbTables.unique("nolock_missing_");

  /** The contract's retry has a time cap only: any give-up fails the hot-item test. */
  private static final RetryPolicy TIME_CAP_ONLY =
      RetryPolicy.custom()
          .maxAttempts(Integer.MAX_VALUE)
          .maxElapsed(Duration.ofMinutes(2))
          .baseDelay(Duration.ofMillis(2))
          .maxDelay(Duration.ofMillis(100))
          .build();

  private static DynamoDbClient dynamo;
  private static SimpleMeterRegistry contractRegistry;
  private static DynamoDbVersionedStore<Long> store;
  private static DynamoDbVersionedStore<Long> missing;

  @BeforeAll
  static void createTable(DynamoDbClient client) {
    dynamo = client;
    contractRegistry = new SimpleMeterRegistry();
    store =
        DynamoDbVersionedStore.create(
            dynamo,
            DynamoDbVersionedStoreConfig.custom(TABLE, AttributeCodec.longs())
                .retryPolicy(TIME_CAP_ONLY)
                .metrics(contractRegistry, "contract")
                .build());
    assertThat(store.createTableIfMissing()).isTrue();
    assertThat(store.createTableIfMissing()).as("idempotent").isFalse();
    missing =
        DynamoDbVersionedStore.create(
            dynamo,
            DynamoDbVersionedStoreConfig.custom(MISSING_TABLE, AttributeCodec.longs()).build());
  }

  @AfterAll
  static void dropTable() {
    System.out.println(
        "DynamoDB versioned store, shared store after all its tests: "
            + Meters.of(contractRegistry));
    DynamoDbTables.drop(dynamo, TABLE);
  }

  @Override
  protected VersionedStore<String, Long> store() {
    return store;
  }

  /** The negative control's write: an unconditional UpdateItem of the value and a fresh rvn. */
  @Override
  protected void blindWrite(String id, long value) {
    dynamo.updateItem(
        update ->
            update
                .tableName(TABLE)
                .key(Map.of("pk", AttributeValue.fromS(id)))
                .updateExpression("SET #v = :v, #rvn = :rvn")
                .expressionAttributeNames(Map.of("#v", "value", "#rvn", "rvn"))
                .expressionAttributeValues(
                    Map.of(
                        ":v", AttributeValue.fromN(Long.toString(value)),
                        ":rvn", AttributeValue.fromS(UUID.randomUUID().toString()))));
  }

  @Override
  protected VersionedStore<String, Long> storeOnMissingTable() {
    return missing;
  }

  @Override
  protected String missingTableName() {
    return MISSING_TABLE;
  }

  @Test
  void theItemHoldsTheValueAsANumberAndAUuidRvnThatChangesWithEveryWrite() {
    String id = newId();
    Versioned<Long> inserted = store.insert(id, 7L).get();
    Map<String, AttributeValue> first = rawItem(TABLE, "pk", id);

    Versioned<Long> swapped = store.compareAndSet(id, inserted.version(), 8L).get();
    Map<String, AttributeValue> second = rawItem(TABLE, "pk", id);

    assertThat(first)
        .containsEntry("value", AttributeValue.fromN("7"))
        .containsEntry("rvn", AttributeValue.fromS(inserted.version().value()));
    assertThat(UUID.fromString(inserted.version().value())).isNotNull();
    assertThat(second)
        .containsEntry("value", AttributeValue.fromN("8"))
        .containsEntry("rvn", AttributeValue.fromS(swapped.version().value()));
    assertThat(swapped.version()).isNotEqualTo(inserted.version());
  }

  @Test
  void compareAndSetLeavesTheItemsOtherAttributesAlone() {
    String id = newId();
    Version v1 = store.insert(id, 1L).get().version();
    dynamo.updateItem(
        update ->
            update
                .tableName(TABLE)
                .key(Map.of("pk", AttributeValue.fromS(id)))
                .updateExpression("SET note = :note")
                .expressionAttributeValues(Map.of(":note", AttributeValue.fromS("kept"))));

    store.compareAndSet(id, v1, 2L).get();

    assertThat(rawItem(TABLE, "pk", id)).containsEntry("note", AttributeValue.fromS("kept"));
  }

  @Test
  void reservedWordsWorkAsAttributeNames() {
    String table = DynamoDbTables.unique("nolock_reserved_");
    DynamoDbVersionedStore<String> reserved =
        DynamoDbVersionedStore.create(
            dynamo,
            DynamoDbVersionedStoreConfig.custom(table, AttributeCodec.strings())
                .keyAttribute("name")
                .valueAttribute("value")
                .versionAttribute("timestamp")
                .build());
    try {
      reserved.createTableIfMissing();
      Version v1 = reserved.insert("order-1", "open").get().version();
      assertThat(reserved.insert("order-1", "again").getLeft().current()).contains(v1);
      Versioned<String> v2 = reserved.compareAndSet("order-1", v1, "paid").get();
      assertThat(reserved.compareAndSet("order-1", v1, "stale").getLeft().current())
          .contains(v2.version());
      Versioned<String> v3 = reserved.update("order-1", s -> s + "+shipped").get();

      assertThat(reserved.read("order-1").get()).isEqualTo(v3);
      assertThat(v3.value()).isEqualTo("paid+shipped");
      assertThat(rawItem(table, "name", "order-1"))
          .containsEntry("value", AttributeValue.fromS("paid+shipped"))
          .containsEntry("timestamp", AttributeValue.fromS(v3.version().value()));
      assertThat(reserved.delete("order-1", v3.version()).isRight()).isTrue();
      assertThat(reserved.read("order-1").isEmpty()).isTrue();
    } finally {
      DynamoDbTables.drop(dynamo, table);
    }
  }

  @Test
  void aHotItemEndsExactlyRightAndItsMetricsCountConflictsAndRetriesAndNoGiveUps()
      throws Exception {
    // The contract's hot-item run again, on a store with a registry of its own.
    int writers = writers();
    int increments = incrementsPerWriter();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    DynamoDbVersionedStore<Long> measured =
        DynamoDbVersionedStore.create(
            dynamo,
            DynamoDbVersionedStoreConfig.custom(TABLE, AttributeCodec.longs())
                .retryPolicy(TIME_CAP_ONLY)
                .metrics(registry, "hot-item")
                .build());
    String id = newId();
    measured.insert(id, 0L);
    long start = System.nanoTime();

    List<Long> gaveUp = runWriters(writers, increments, () -> measured.update(id, v -> v + 1));

    Duration took = Duration.ofNanos(System.nanoTime() - start);
    Meters meters = Meters.of(registry);
    System.out.printf(
        "DynamoDB versioned store, %d writers x %d increments of one item: %d ms, %s%n",
        writers, increments, took.toMillis(), meters);
    assertThat(gaveUp).isEmpty();
    assertThat(measured.read(id).get().value()).isEqualTo((long) writers * increments);
    assertThat(meters.conflicts()).as("the writers did collide").isPositive();
    assertThat(meters.retries()).as("every conflict was retried").isEqualTo(meters.conflicts());
    assertThat(meters.giveUps()).isZero();
    assertThat(meters.attempts())
        .as("the insert, one successful write per increment, one attempt per retry")
        .isEqualTo(1 + writers * increments + meters.retries());
  }

  @Test
  void whenThePolicyGivesUpUpdateReturnsTheLastConflictAndCountsIt() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    DynamoDbVersionedStore<Long> twoAttempts =
        DynamoDbVersionedStore.create(
            dynamo,
            DynamoDbVersionedStoreConfig.custom(TABLE, AttributeCodec.longs())
                .retryPolicy(RetryPolicy.custom().maxAttempts(2).baseDelay(Duration.ZERO).build())
                .metrics(registry, "give-up")
                .build());
    String id = newId();
    store.insert(id, 0L);

    // Another writer gets in between every read and write of the update.
    Either<Conflict, Versioned<Long>> result =
        twoAttempts.update(
            id,
            v -> {
              Versioned<Long> current = store.read(id).get();
              store.compareAndSet(id, current.version(), current.value() + 100);
              return v + 1;
            });

    Versioned<Long> now = store.read(id).get();
    assertThat(result.getLeft().current()).contains(now.version());
    assertThat(now.value()).as("only the interfering writes landed").isEqualTo(200L);
    Meters meters = Meters.of(registry);
    assertThat(meters.attempts()).isEqualTo(2);
    assertThat(meters.conflicts()).isEqualTo(2);
    assertThat(meters.retries()).isEqualTo(1);
    assertThat(meters.giveUps()).isEqualTo(1);
  }

  @Test
  void aMissingTableIsAnErrorThatSaysHowToCreateIt() {
    assertThatThrownBy(() -> missing.insert(newId(), 1L))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(MISSING_TABLE)
        .hasMessageContaining("createTableIfMissing()")
        .hasMessageContaining("aws dynamodb create-table");
  }

  @Test
  void aKeyAttributeThatIsNotTheTablesKeyIsReportedAsMisconfiguration() {
    DynamoDbVersionedStore<Long> wrongKey =
        DynamoDbVersionedStore.create(
            dynamo,
            DynamoDbVersionedStoreConfig.custom(TABLE, AttributeCodec.longs())
                .keyAttribute("id")
                .build());

    assertThatThrownBy(() -> wrongKey.insert(newId(), 1L))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("as invalid")
        .hasMessageContaining("\"id\"");
  }

  @Test
  void anItemNotWrittenByTheStoreIsReportedAsSuch() {
    String id = newId();
    dynamo.putItem(
        put ->
            put.tableName(TABLE)
                .item(Map.of("pk", AttributeValue.fromS(id), "value", AttributeValue.fromS("x"))));

    assertThatThrownBy(() -> store.read(id))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("\"rvn\"");
    dynamo.putItem(
        put ->
            put.tableName(TABLE)
                .item(
                    Map.of(
                        "pk", AttributeValue.fromS(id),
                        "value", AttributeValue.fromS("x"),
                        "rvn", AttributeValue.fromS("r"))));
    assertThatThrownBy(() -> store.read(id))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("AttributeCodec.longs()");
  }

  @Test
  void anUnreachableServerIsABackendUnavailableException() {
    try (DynamoDbClient unreachable =
        DynamoDbClient.builder()
            .endpointOverride(URI.create("http://127.0.0.1:1"))
            .region(Region.US_EAST_1)
            .credentialsProvider(
                StaticCredentialsProvider.create(AwsBasicCredentials.create("nolock", "nolock")))
            .httpClientBuilder(Apache5HttpClient.builder().connectionTimeout(Duration.ofSeconds(1)))
            .overrideConfiguration(o -> o.retryStrategy(r -> r.maxAttempts(1)))
            .build()) {
      DynamoDbVersionedStore<Long> broken =
          DynamoDbVersionedStore.create(
              unreachable,
              DynamoDbVersionedStoreConfig.custom(TABLE, AttributeCodec.longs()).build());

      assertThatThrownBy(() -> broken.read("x"))
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining(TABLE)
          .hasMessageContaining("retry later");
    }
  }

  @Test
  void anEmptyIdOrANullNewValueIsRefused() {
    assertThatThrownBy(() -> store.read(""))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("empty");
    String id = newId();
    store.insert(id, 1L);
    assertThatThrownBy(() -> store.update(id, v -> null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("returned null");
  }

  private static Map<String, AttributeValue> rawItem(String table, String keyAttribute, String id) {
    return dynamo
        .getItem(
            get ->
                get.tableName(table)
                    .key(Map.of(keyAttribute, AttributeValue.fromS(id)))
                    .consistentRead(true))
        .item();
  }

  /**
   * Runs {@code update} {@code increments} times on each of {@code writers} threads; returns
   * give-ups.
   */
  private static List<Long> runWriters(
      int writers, int increments, Supplier<Either<Conflict, Versioned<Long>>> update)
      throws Exception {
    ExecutorService pool = Executors.newFixedThreadPool(writers);
    CountDownLatch start = new CountDownLatch(1);
    List<Long> gaveUp = Collections.synchronizedList(new ArrayList<>());
    try {
      List<Future<?>> futures = new ArrayList<>();
      for (int w = 0; w < writers; w++) {
        futures.add(
            pool.submit(
                () -> {
                  start.await();
                  for (int i = 0; i < increments; i++) {
                    if (update.get().isLeft()) {
                      gaveUp.add((long) i);
                    }
                  }
                  return null;
                }));
      }
      start.countDown();
      for (Future<?> f : futures) {
        f.get(5, TimeUnit.MINUTES);
      }
    } finally {
      pool.shutdownNow();
    }
    return gaveUp;
  }
}
