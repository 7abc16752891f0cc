package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.HeldAdvisoryLock;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The advisory lock that serialises schema creation is in the queue's own namespace: another
 * application's advisory lock on the table's bare name ({@code hashtextextended('orders', 0)}, the
 * key before the namespace existed) does not hold {@code createTableIfMissing} up, while a holder
 * of the queue's own key does. That {@code createTableIfMissing} calls made at once still take
 * turns is {@link ConcurrentCreateIT}'s and {@code SchemaCheckIT}'s.
 */
@ExtendWith(PostgresExtension.class)
class SchemaLockKeyIT {

  private final PostgresSchema schema;

  SchemaLockKeyIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @Test
  void anAdvisoryLockOnTheTablesBareNameDoesNotBlockSchemaCreation() throws Exception {
    // Qualified, so that no other test class uses the same key on the shared database.
    String table = schema.schemaName() + ".orders";
    try (HeldAdvisoryLock other = HeldAdvisoryLock.hold(schema.jdbcUrl(), table)) {
      CompletableFuture<Void> created = CompletableFuture.runAsync(() -> create(table));

      assertThat(other.blocks(created))
          .as("createTableIfMissing waits for a lock on hashtextextended('%s', 0)", table)
          .isFalse();
      created.get(30, TimeUnit.SECONDS);
    }
  }

  /** The negative control: the same detection catches a holder of the queue's own key. */
  @Test
  void theQueuesOwnKeyStillBlocksSchemaCreation() throws Exception {
    String table = schema.schemaName() + ".own_key_jobs";
    CompletableFuture<Void> created;
    try (HeldAdvisoryLock sameQueue =
        HeldAdvisoryLock.hold(schema.jdbcUrl(), "nolock.queue.schema:" + table)) {
      created = CompletableFuture.runAsync(() -> create(table));

      assertThat(sameQueue.blocks(created))
          .as("createTableIfMissing waits for the holder of the queue's key for %s", table)
          .isTrue();
    }
    created.get(30, TimeUnit.SECONDS);
  }

  private void create(String table) {
    JobQueue.create(
            schema.dataSource(), QueueConfig.custom("q").table(table).build(), PayloadCodec.utf8())
        .createTableIfMissing();
  }
}
