package dev.nolock.lock.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.dynamodb.DynamoDbFence;
import dev.nolock.dynamodb.DynamoDbFenceConfig;
import dev.nolock.lock.FencedLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.NotAcquired;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.testkit.DynamoDbExtension;
import dev.nolock.testkit.ReadmeSnippet;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;

/** The README's usage snippet, run: only the table names differ, so tests never collide. */
@ExtendWith(DynamoDbExtension.class)
class ReadmeSnippetsIT {

  private static final Path README = Path.of("README.md");

  @Test
  void theReadmeSnippetChargesTheInvoiceUnderTheLockThroughTheFence(DynamoDbClient dynamo) {
    String locksTable = LockTables.unique("billing_locks_");
    String invoicesTable = LockTables.unique("invoices_");
    LockTables.createDataTable(dynamo, invoicesTable);
    try {
      // --- README: Usage ---
      MeterRegistry registry = new SimpleMeterRegistry(); // or your application's registry

      DynamoDbLockBackend backend =
          DynamoDbLockBackend.create(
              dynamo, DynamoDbLockBackendConfig.custom().tableName(locksTable).build());
      backend.createTableIfMissing(); // tests and first runs; production tables come from IaC
      DynamoDbFence fence =
          DynamoDbFence.create(
              dynamo,
              DynamoDbFenceConfig.custom(invoicesTable).metrics(registry, "billing").build());

      try (FencedLock locks =
          FencedLock.create(
              backend,
              LockConfig.custom(LockPurpose.CORRECTNESS).metrics(registry, "billing").build())) {
        Either<NotAcquired, Either<FenceRejection, Void>> result =
            locks.withLock(
                "invoice-42",
                Duration.ofSeconds(10),
                Duration.ofSeconds(25), // > 2 × TTL: enough to outwait a crashed holder
                held -> {
                  held.checkPointOfNoReturn(Duration.ofMillis(50)); // throws LeaseLostException
                  return fence.update( // refused if a newer holder wrote
                      held.lease(),
                      Map.of("pk", AttributeValue.fromS("invoice-42")),
                      Map.of("status", AttributeValue.fromS("charged")));
                });
        // --- end of snippet ---

        assertThat(result.isRight()).isTrue();
        assertThat(result.get().isRight()).isTrue();
      }
      assertThat(
              dynamo
                  .getItem(
                      get ->
                          get.tableName(invoicesTable)
                              .key(Map.of("pk", AttributeValue.fromS("invoice-42")))
                              .consistentRead(true))
                  .item())
          .containsEntry("status", AttributeValue.fromS("charged"))
          .containsEntry("fence_token", AttributeValue.fromN("1"));
      assertThat(backend.inspect("invoice-42").get().isFree()).as("withLock released it").isTrue();
      assertThat(registry.get("nolock.acquire.wait").tag("outcome", "acquired").timer().count())
          .isEqualTo(1);
    } finally {
      LockTables.drop(dynamo, locksTable);
      LockTables.drop(dynamo, invoicesTable);
    }
  }

  /** The README shows the code the test above runs, with the test's client and table names. */
  @Test
  void theReadmeShowsTheCodeTheTestRuns() {
    ReadmeSnippet.javaBlock(README, "## Usage")
        .readmeOnly(
            "DynamoDbClient dynamo = DynamoDbClient.create();    // region and credentials from the"
                + " environment")
        .replacing("\"billing_locks\"", "locksTable")
        .replacing(
            "DynamoDbFenceConfig.custom(\"invoices\")", "DynamoDbFenceConfig.custom(invoicesTable)")
        .assertRunBy(ReadmeSnippetsIT.class, "Usage");
  }
}
