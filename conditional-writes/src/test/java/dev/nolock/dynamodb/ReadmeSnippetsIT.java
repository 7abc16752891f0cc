package dev.nolock.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.Versioned;
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
  void theReadmeSnippetChargesRefundsAndWritesThroughTheFence(DynamoDbClient dynamo) {
    String balancesTable = DynamoDbTables.unique("balances_");
    String invoicesTable = DynamoDbTables.unique("invoices_");
    Lease lease =
        new Lease(
            "invoice-42",
            "billing-1",
            FencingToken.of(1),
            Deadline.forHolder(LeaseClock.system(), System.nanoTime(), Duration.ofSeconds(10)));
    try {
      DynamoDbVersionedStore.create(
              dynamo,
              DynamoDbVersionedStoreConfig.custom(invoicesTable, AttributeCodec.longs()).build())
          .createTableIfMissing();

      // --- README: Usage ---
      MeterRegistry registry = new SimpleMeterRegistry(); // or your application's registry

      DynamoDbVersionedStore<Long> balances =
          DynamoDbVersionedStore.create(
              dynamo,
              DynamoDbVersionedStoreConfig.custom(balancesTable, AttributeCodec.longs())
                  .retryPolicy(
                      RetryPolicy.custom()
                          .maxAttempts(20)
                          .maxElapsed(Duration.ofSeconds(5))
                          .build())
                  .metrics(registry, "balances")
                  .build());
      balances.createTableIfMissing(); // tests and first runs; production tables come from IaC

      balances.insert("account-7", 100L);

      // Read, apply, compare-and-set, retried on a lost race:
      Either<Conflict, Versioned<Long>> charged = balances.update("account-7", cents -> cents - 30);

      // Or by hand, e.g. across a user's think time: the rvn travels with the value.
      Versioned<Long> seen = balances.read("account-7").get();
      Either<Conflict, Versioned<Long>> refunded =
          balances.compareAndSet("account-7", seen.version(), seen.value() + 5);
      if (refunded.isLeft()) {
        // someone else changed it since `seen`: re-read, re-decide
      }

      // A fenced write to one item, with the lease of a fenced lock (e.g. held.lease()):
      DynamoDbFence fence =
          DynamoDbFence.create(
              dynamo,
              DynamoDbFenceConfig.custom(invoicesTable).metrics(registry, "invoices").build());
      Either<FenceRejection, Void> written =
          fence.update(
              lease,
              Map.of("pk", AttributeValue.fromS("invoice-42")),
              Map.of("status", AttributeValue.fromS("charged")));
      // --- end of snippet ---

      assertThat(charged.get().value()).isEqualTo(70L);
      assertThat(refunded.get().value()).isEqualTo(75L);
      assertThat(balances.read("account-7").get()).isEqualTo(refunded.get());
      assertThat(written.isRight()).isTrue();
      assertThat(registry.get(DynamoDbVersionedStore.ATTEMPTS).counter().count()).isEqualTo(3);
    } finally {
      DynamoDbTables.drop(dynamo, balancesTable);
      DynamoDbTables.drop(dynamo, invoicesTable);
    }
  }

  /** The README shows the code the test above runs, with the test's client and table names. */
  @Test
  void theReadmeShowsTheCodeTheTestRuns() {
    ReadmeSnippet.javaBlock(README, "## Usage")
        .readmeOnly(
            "DynamoDbClient dynamo = DynamoDbClient.create();    // region and credentials from the"
                + " environment")
        .replacing("custom(\"balances\"", "custom(balancesTable")
        .replacing(
            "DynamoDbFenceConfig.custom(\"invoices\")", "DynamoDbFenceConfig.custom(invoicesTable)")
        .assertRunBy(ReadmeSnippetsIT.class, "Usage");
  }
}
