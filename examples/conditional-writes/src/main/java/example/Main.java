package example;

import dev.nolock.dynamodb.AttributeCodec;
import dev.nolock.dynamodb.DynamoDbVersionedStore;
import dev.nolock.dynamodb.DynamoDbVersionedStoreConfig;
import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.Versioned;
import io.vavr.control.Either;
import java.net.URI;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import software.amazon.awssdk.auth.credentials.AwsBasicCredentials;
import software.amazon.awssdk.auth.credentials.StaticCredentialsProvider;
import software.amazon.awssdk.regions.Region;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/** A stale conditional write is refused, and concurrent read-modify-writes lose no update. */
public final class Main {

  public static void main(String[] args) throws Exception {
    // Against AWS, DynamoDbClient.create() takes the region and credentials from the
    // environment; here a DynamoDB-compatible server on its endpoint, which takes any key.
    DynamoDbClient dynamo =
        DynamoDbClient.builder()
            .endpointOverride(URI.create(env("NOLOCK_DYNAMODB_ENDPOINT", "http://127.0.0.1:4567")))
            .region(Region.US_EAST_1)
            .credentialsProvider(
                StaticCredentialsProvider.create(AwsBasicCredentials.create("example", "example")))
            .build();
    String table = "balances-" + UUID.randomUUID(); // this run's own table

    DynamoDbVersionedStore<Long> balances =
        DynamoDbVersionedStore.create(
            dynamo,
            DynamoDbVersionedStoreConfig.custom(table, AttributeCodec.longs())
                .retryPolicy(
                    RetryPolicy.custom().maxAttempts(20).maxElapsed(Duration.ofSeconds(5)).build())
                .build());
    balances.createTableIfMissing(); // tests and first runs; production tables come from IaC
    balances.insert("account-7", 100L);

    // Two clients read the same rvn; the first write wins, the second is refused.
    Versioned<Long> seen = balances.read("account-7").get();
    Either<Conflict, Versioned<Long>> first =
        balances.compareAndSet("account-7", seen.version(), 70L);
    Either<Conflict, Versioned<Long>> second =
        balances.compareAndSet("account-7", seen.version(), 90L);
    check(first.isRight(), "the first conditional write was refused: " + first);
    check(second.isLeft(), "the second conditional write, on a stale rvn, went through");
    System.out.println("stale write refused: " + second.getLeft());

    // Four threads add 1 twenty-five times each: read, apply, conditional write, retried on a
    // lost race. Every update that reports success is in the balance; none is lost.
    ExecutorService threads = Executors.newFixedThreadPool(4);
    List<Future<Either<Conflict, Versioned<Long>>>> updates = new ArrayList<>();
    for (int i = 0; i < 100; i++) {
      updates.add(threads.submit(() -> balances.update("account-7", cents -> cents + 1)));
    }
    int applied = 0;
    for (Future<Either<Conflict, Versioned<Long>>> update : updates) {
      applied += update.get().isRight() ? 1 : 0; // a Left: gave up after the retry policy
    }
    threads.shutdown();
    long balance = balances.read("account-7").get().value();
    System.out.println(applied + " of 100 concurrent updates applied, balance " + balance);
    check(balance == 70 + applied, "lost updates: the balance is " + balance);
    check(applied > 0, "no concurrent update got through");

    dynamo.deleteTable(request -> request.tableName(table));
    dynamo.close();
    System.out.println("OK: the stale write was refused and no update was lost");
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
