package dev.nolock.benchmarks;

import com.amazonaws.services.dynamodbv2.AcquireLockOptions;
import com.amazonaws.services.dynamodbv2.AmazonDynamoDBLockClient;
import com.amazonaws.services.dynamodbv2.AmazonDynamoDBLockClientOptions;
import com.amazonaws.services.dynamodbv2.CreateDynamoDBTableOptions;
import com.amazonaws.services.dynamodbv2.LockItem;
import com.amazonaws.services.dynamodbv2.model.LockCurrentlyUnavailableException;
import dev.nolock.dynamodb.AttributeCodec;
import dev.nolock.dynamodb.DynamoDbVersionedStore;
import dev.nolock.dynamodb.DynamoDbVersionedStoreConfig;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.Versioned;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import software.amazon.awssdk.retries.api.BackoffStrategy;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;
import software.amazon.awssdk.services.dynamodb.model.BatchWriteItemResponse;
import software.amazon.awssdk.services.dynamodb.model.ConditionalCheckFailedException;
import software.amazon.awssdk.services.dynamodb.model.GetItemResponse;
import software.amazon.awssdk.services.dynamodb.model.ProvisionedThroughput;
import software.amazon.awssdk.services.dynamodb.model.PutRequest;
import software.amazon.awssdk.services.dynamodb.model.WriteRequest;
import software.amazon.awssdk.services.dynamodb.waiters.DynamoDbWaiter;

/**
 * Increment a counter for a key on DynamoDB: read the item, write {@code value + 1} only if nobody
 * changed it in between. One attempt per invocation; a lost race is a conflict, not retried.
 *
 * <p>The server is dynalite on loopback ({@link Bench#dynamoDb()}), a DynamoDB-compatible server
 * that runs on <b>one Node.js thread</b>: every request of every benchmark thread queues on that
 * thread, so the figures are dynalite's request rate, not DynamoDB's, and the variants rank by how
 * many requests they send per unit of work. They say nothing about DynamoDB's absolute latency.
 *
 * <p>Each trial gets a fresh counter table (and, for the lock client, a fresh lock table) with a
 * unique name, filled with one item per key ({@code pk} = the key, {@code value} = 0, {@code rvn} =
 * a random UUID) by {@code BatchWriteItem} in chunks of 25, and deleted in the teardown. A trial's
 * threads share one {@link DynamoDbClient} (the SDK's default HTTP pool of 50 connections, more
 * than the threads), as the store and the lock client share the caller's client.
 *
 * <ul>
 *   <li>{@code dynamoVersionedStore}: nolock's {@link DynamoDbVersionedStore} with {@link
 *       RetryPolicy#noRetry()}:
 *       <ol>
 *         <li>{@code read(id)}: {@code GetItem}, consistent, projecting {@code #v, #rvn};
 *         <li>{@code compareAndSet(id, rvn, value + 1)}: {@code UpdateItem SET #v = :value, #rvn =
 *             :new} on {@code #rvn = :expected}, with a fresh UUID as the new rvn;
 *         <li>only when the condition fails: a second consistent {@code GetItem}, which the store
 *             does to put the item's current rvn in the {@code Conflict}.
 *       </ol>
 *   <li>{@code dynamoRawSdk}: the floor, the store's requests through the plain {@link
 *       DynamoDbClient} (same projection, same expressions, same attribute names, a UUID rvn):
 *       steps 1 and 2, and step 3 when {@link ConditionalCheckFailedException} says the race was
 *       lost. On a hot key every conflict costs both one more request on the single dynalite
 *       thread; on 10,000 keys conflicts are rare.
 *   <li>{@code dynamoLockClient}: the peer, the AWS DynamoDB Lock Client 1.4.0 on its own lock
 *       table (created with {@link AmazonDynamoDBLockClient#createLockTableInDynamoDB}), one client
 *       for all threads, configured as its README's example: lease 10 s, a background heartbeat
 *       thread every 3 s (it renews every lock the client holds; a unit of work here lasts
 *       milliseconds, so it seldom finds one):
 *       <ol>
 *         <li>{@code tryAcquireLock} for the key with {@code shouldSkipBlockingWait(true)}, no
 *             additional wait and no refresh period: a consistent {@code GetItem} of the lock item,
 *             then, when it is absent, a {@code PutItem} on {@code attribute_not_exists}. A lock
 *             held by someone else ends the attempt after the {@code GetItem} ({@code
 *             LockCurrentlyUnavailableException}); a lost {@code PutItem} race ends it with an
 *             empty result. (The client re-reads the lock only when it lost that race within the
 *             millisecond it started, its wait being 0 ms; counting requests at 4 threads on one
 *             key found exactly one lock {@code GetItem} per attempt, so each invocation is one
 *             attempt.)
 *         <li>the increment, unversioned because the lock protects it: a consistent {@code GetItem}
 *             of the counter, then a {@code PutItem} of key and {@code value + 1};
 *         <li>{@code releaseLock}: a {@code DeleteItem} of the lock item on owner and rvn (the
 *             default {@code deleteLockOnRelease}).
 *       </ol>
 *       Five requests per increment against the store's two: that is the cost of a lease lock
 *       around a read-modify-write that a conditional write does alone, and the comparison the
 *       benchmark exists to show.
 * </ul>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
public class DynamoDbBenchmark {

  private static final String PK = "pk";
  private static final String VALUE = "value";
  private static final String RVN = "rvn";
  private static final int BATCH = 25; // BatchWriteItem's limit per request

  /** 1 is the hot key; 10000 spreads the writes. */
  @Param({"1", "10000"})
  public int keys;

  private DynamoDbClient dynamo;
  private String table;
  private String lockTable;
  private String[] ids;
  private DynamoDbVersionedStore<Long> store;
  private AmazonDynamoDBLockClient lockClient;

  /**
   * A worker of a paired run keeps its client and tables for its life ({@code keys} to {@code
   * {table, lockTable}}): filling 10,000 items takes 400 requests, more than a turn measures. The
   * items keep their values and versions from earlier turns; a key-value store's speed does not
   * depend on them (no dead rows to vacuum, unlike PostgreSQL's tables).
   */
  private static DynamoDbClient workerDynamo;

  private static final Map<Integer, String[]> workerTables = new ConcurrentHashMap<>();

  static {
    if (TurnWorker.active()) {
      Runtime.getRuntime()
          .addShutdownHook(
              new Thread(
                  () -> workerTables.values().forEach(t -> dropTables(workerDynamo, t)),
                  "drop-tables"));
    }
  }

  @Setup(Level.Trial)
  public void setUp() {
    if (TurnWorker.active() && workerTables.containsKey(keys)) {
      dynamo = workerDynamo;
      table = workerTables.get(keys)[0];
      lockTable = workerTables.get(keys)[1];
      ids = new String[keys];
      for (int i = 0; i < keys; i++) {
        ids[i] = Integer.toString(i);
      }
      store =
          DynamoDbVersionedStore.create(
              dynamo,
              DynamoDbVersionedStoreConfig.custom(table, AttributeCodec.longs())
                  .retryPolicy(RetryPolicy.noRetry())
                  .build());
      lockClient = lockClient(lockTable);
      return;
    }
    dynamo = TurnWorker.active() && workerDynamo != null ? workerDynamo : Bench.dynamoDb();
    table = Bench.unique("bench");
    ids = new String[keys];
    for (int i = 0; i < keys; i++) {
      ids[i] = Integer.toString(i);
    }
    store =
        DynamoDbVersionedStore.create(
            dynamo,
            DynamoDbVersionedStoreConfig.custom(table, AttributeCodec.longs())
                .retryPolicy(RetryPolicy.noRetry())
                .build());
    store.createTableIfMissing();
    fill();
    lockTable = Bench.unique("bench_locks");
    AmazonDynamoDBLockClient.createLockTableInDynamoDB(
        CreateDynamoDBTableOptions.builder(
                dynamo,
                ProvisionedThroughput.builder()
                    .readCapacityUnits(100L)
                    .writeCapacityUnits(100L)
                    .build(),
                lockTable)
            .build());
    awaitActive(lockTable);
    lockClient = lockClient(lockTable);
    if (TurnWorker.active()) {
      workerDynamo = dynamo;
      workerTables.put(keys, new String[] {table, lockTable});
    }
  }

  private AmazonDynamoDBLockClient lockClient(String lockTable) {
    return new AmazonDynamoDBLockClient(
        AmazonDynamoDBLockClientOptions.builder(dynamo, lockTable)
            .withLeaseDuration(10L)
            .withTimeUnit(TimeUnit.SECONDS)
            .withHeartbeatPeriod(3L)
            .withCreateHeartbeatBackgroundThread(true)
            .build());
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    TurnWorker.afterTrial(this::close);
  }

  private void close() {
    try {
      lockClient.close();
    } catch (IOException e) {
      throw new java.io.UncheckedIOException(e);
    } finally {
      if (!TurnWorker.active()) { // a worker keeps them for its next turn, and drops them at exit
        dropTables(dynamo, table, lockTable);
        dynamo.close();
      }
    }
  }

  private static void dropTables(DynamoDbClient dynamo, String... tables) {
    for (String name : tables) {
      dynamo.deleteTable(delete -> delete.tableName(name));
    }
  }

  @Benchmark
  public void dynamoVersionedStore(Outcomes outcomes) {
    String id = ids[Bench.pick(keys)];
    Versioned<Long> current = store.read(id).get();
    outcomes.of(store.compareAndSet(id, current.version(), current.value() + 1).isRight());
  }

  @Benchmark
  public void dynamoRawSdk(Outcomes outcomes) {
    String id = ids[Bench.pick(keys)];
    Map<String, AttributeValue> key = Map.of(PK, AttributeValue.fromS(id));
    Map<String, AttributeValue> item = read(key);
    long value = Long.parseLong(item.get(VALUE).n());
    String rvn = item.get(RVN).s();
    try {
      dynamo.updateItem(
          update ->
              update
                  .tableName(table)
                  .key(key)
                  .updateExpression("SET #v = :value, #rvn = :new")
                  .conditionExpression("#rvn = :expected")
                  .expressionAttributeNames(Map.of("#v", VALUE, "#rvn", RVN))
                  .expressionAttributeValues(
                      Map.of(
                          ":value", AttributeValue.fromN(Long.toString(value + 1)),
                          ":new", AttributeValue.fromS(UUID.randomUUID().toString()),
                          ":expected", AttributeValue.fromS(rvn))));
      outcomes.of(true);
    } catch (ConditionalCheckFailedException lost) {
      // The store reads the item again for the rvn it reports in its Conflict.
      read(key);
      outcomes.of(false);
    }
  }

  private Map<String, AttributeValue> read(Map<String, AttributeValue> key) {
    return dynamo
        .getItem(
            get ->
                get.tableName(table)
                    .key(key)
                    .consistentRead(true)
                    .projectionExpression("#v, #rvn")
                    .expressionAttributeNames(Map.of("#v", VALUE, "#rvn", RVN)))
        .item();
  }

  @Benchmark
  public void dynamoLockClient(Outcomes outcomes) throws InterruptedException {
    String id = ids[Bench.pick(keys)];
    Optional<LockItem> lock;
    try {
      lock =
          lockClient.tryAcquireLock(
              AcquireLockOptions.builder(id)
                  .withShouldSkipBlockingWait(true)
                  .withAdditionalTimeToWaitForLock(0L)
                  .withRefreshPeriod(0L)
                  .withTimeUnit(TimeUnit.MILLISECONDS)
                  .build());
    } catch (LockCurrentlyUnavailableException held) {
      outcomes.of(false);
      return;
    }
    if (lock.isEmpty()) {
      outcomes.of(false);
      return;
    }
    try {
      Map<String, AttributeValue> key = Map.of(PK, AttributeValue.fromS(id));
      GetItemResponse counter =
          dynamo.getItem(get -> get.tableName(table).key(key).consistentRead(true));
      long value = Long.parseLong(counter.item().get(VALUE).n());
      dynamo.putItem(
          put ->
              put.tableName(table)
                  .item(
                      Map.of(
                          PK,
                          AttributeValue.fromS(id),
                          VALUE,
                          AttributeValue.fromN(Long.toString(value + 1)))));
    } finally {
      lockClient.releaseLock(lock.get());
    }
    outcomes.of(true);
  }

  private void fill() {
    List<WriteRequest> batch = new ArrayList<>(BATCH);
    for (String id : ids) {
      batch.add(
          WriteRequest.builder()
              .putRequest(
                  PutRequest.builder()
                      .item(
                          Map.of(
                              PK,
                              AttributeValue.fromS(id),
                              VALUE,
                              AttributeValue.fromN("0"),
                              RVN,
                              AttributeValue.fromS(UUID.randomUUID().toString())))
                      .build())
              .build());
      if (batch.size() == BATCH) {
        write(batch);
        batch = new ArrayList<>(BATCH);
      }
    }
    if (!batch.isEmpty()) {
      write(batch);
    }
  }

  private void write(List<WriteRequest> batch) {
    Map<String, List<WriteRequest>> pending = Map.of(table, batch);
    while (!pending.isEmpty()) {
      Map<String, List<WriteRequest>> request = pending;
      BatchWriteItemResponse response = dynamo.batchWriteItem(write -> write.requestItems(request));
      pending = response.hasUnprocessedItems() ? response.unprocessedItems() : Map.of();
    }
  }

  /**
   * The SDK's own waiter, polling every 50 ms (its default first delay is 20 s) for up to 1 min.
   */
  private void awaitActive(String name) {
    try (DynamoDbWaiter waiter =
        DynamoDbWaiter.builder()
            .client(dynamo)
            .overrideConfiguration(
                wait ->
                    wait.backoffStrategyV2(
                            BackoffStrategy.fixedDelayWithoutJitter(Duration.ofMillis(50)))
                        .waitTimeout(Duration.ofMinutes(1)))
            .build()) {
      waiter.waitUntilTableExists(describe -> describe.tableName(name));
    }
  }
}
