package example;

import dev.nolock.dynamodb.DynamoDbFence;
import dev.nolock.dynamodb.DynamoDbFenceConfig;
import dev.nolock.dynamodb.OneKeyTables;
import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.NotAcquired;
import dev.nolock.lock.dynamodb.DynamoDbLockBackend;
import dev.nolock.lock.dynamodb.DynamoDbLockBackendConfig;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.Lease;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.net.URI;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReference;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

/**
 * Two instances charge one invoice under the fenced lock; the first one's late write is refused.
 */
public final class Main {

  public static void main(String[] args) {
    // Against AWS, DynamoDbClient.create() takes the region and credentials from the
    // environment; here a DynamoDB-compatible server on its endpoint, which takes any key.
    DynamoDbClient dynamo =
        DynamoDbClient.builder()
            .endpointOverride(URI.create(env("NOLOCK_DYNAMODB_ENDPOINT", "http://127.0.0.1:4567")))
            .region(Region.US_EAST_1)
            .credentialsProvider(
                StaticCredentialsProvider.create(AwsBasicCredentials.create("example", "example")))
            // well below the lease TTL; the SDK's default lets one call hang on much longer
            .overrideConfiguration(override -> override.apiCallTimeout(Duration.ofSeconds(2)))
            .build();
    String run = UUID.randomUUID().toString(); // this run's own tables
    String locksTable = "billing_locks-" + run;
    String invoicesTable = "invoices-" + run;
    Map<String, AttributeValue> invoice = Map.of("pk", AttributeValue.fromS("invoice-42"));

    // Two instances of a service, each with its own backend (one per process: it remembers the
    // leases it watched) and its own lock facade (its own owner identity).
    DynamoDbLockBackend firstBackend = backend(dynamo, locksTable);
    firstBackend.createTableIfMissing(); // tests and first runs; production tables come from IaC
    // The data table; the same helper createTableIfMissing uses (it polls until ACTIVE).
    OneKeyTables.createIfMissing(dynamo, invoicesTable, "pk");
    DynamoDbFence fence =
        DynamoDbFence.create(dynamo, DynamoDbFenceConfig.custom(invoicesTable).build());
    try (FencedLock first = FencedLock.create(firstBackend, correctness());
        FencedLock second = FencedLock.create(backend(dynamo, locksTable), correctness())) {
      AtomicReference<Lease> firstLease = new AtomicReference<>();
      Either<NotAcquired, Either<FenceRejection, Void>> charged =
          first.withLock(
              "invoice-42",
              Duration.ofSeconds(10),
              Duration.ofSeconds(2),
              held -> {
                Option<HeldLock> meanwhile =
                    second.tryAcquire("invoice-42", Duration.ofSeconds(10));
                check(meanwhile.isEmpty(), "the second instance got the lock the first one holds");
                firstLease.set(held.lease());
                held.checkPointOfNoReturn(Duration.ofMillis(50)); // throws LeaseLostException
                return fence.update(held.lease(), invoice, status("charged")); // refused if stale
              });
      check(charged.isRight() && charged.get().isRight(), "the holder's write failed: " + charged);
      System.out.println("first holder, token " + firstLease.get().token().value() + ": charged");

      // The first holder released (the item says so: no watching); the second takes over and
      // writes with a higher token.
      Either<NotAcquired, Either<FenceRejection, Void>> refunded =
          second.withLock(
              "invoice-42",
              Duration.ofSeconds(10),
              Duration.ofSeconds(2),
              held -> {
                check(held.token().isNewerThan(firstLease.get().token()), "token not higher");
                System.out.println("second holder, token " + held.token().value() + ": refunded");
                return fence.update(held.lease(), invoice, status("refunded"));
              });
      check(refunded.isRight() && refunded.get().isRight(), "the new holder's write failed");

      // A write that arrives late from the first holder (it was paused, say) is refused.
      Either<FenceRejection, Void> late =
          fence.update(firstLease.get(), invoice, status("charged"));
      check(late.isLeft(), "the stale holder's write went through");
      System.out.println("first holder's late write: refused (" + late.getLeft().describe() + ")");

      AttributeValue stored =
          dynamo
              .getItem(get -> get.tableName(invoicesTable).key(invoice).consistentRead(true))
              .item()
              .get("status");
      check(stored != null && "refunded".equals(stored.s()), "the invoice is " + stored);
    }
    dynamo.deleteTable(delete -> delete.tableName(locksTable));
    dynamo.deleteTable(delete -> delete.tableName(invoicesTable));
    dynamo.close();
    System.out.println("OK: one holder at a time, and the stale write did not land");
  }

  private static LockConfig correctness() {
    return LockConfig.ofDefaults(LockPurpose.CORRECTNESS);
  }

  private static DynamoDbLockBackend backend(DynamoDbClient dynamo, String table) {
    return DynamoDbLockBackend.create(
        dynamo, DynamoDbLockBackendConfig.custom().tableName(table).build());
  }

  private static Map<String, AttributeValue> status(String status) {
    return Map.of("status", AttributeValue.fromS(status));
  }

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isBlank() ? fallback : value;
  }

  private static void check(boolean ok, String failure) {
    if (!ok) {
      System.err.println("FAILED: " + failure);
      System.exit(1);
    }
  }
}
