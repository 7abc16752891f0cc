package dev.nolock.dynamodb;

import java.time.Duration;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeDefinition;
import software.amazon.awssdk.services.dynamodb.model.BillingMode;
import software.amazon.awssdk.services.dynamodb.model.KeySchemaElement;
import software.amazon.awssdk.services.dynamodb.model.KeyType;
import software.amazon.awssdk.services.dynamodb.model.ResourceInUseException;
import software.amazon.awssdk.services.dynamodb.model.ResourceNotFoundException;
import software.amazon.awssdk.services.dynamodb.model.ScalarAttributeType;
import software.amazon.awssdk.services.dynamodb.model.TableStatus;

/**
 * Creating the one-key tables nolock's DynamoDB components use (a string partition key, no sort
 * key), behind their {@code createTableIfMissing()}.
 *
 * <p>A building block for DynamoDB components (this module's store and the fenced lock's DynamoDB
 * backend), public so that every one creates and awaits its table the same way.
 */
public final class OneKeyTables {

  private static final Duration POLL = Duration.ofMillis(500);
  private static final Duration MAX_WAIT = Duration.ofMinutes(5);

  private OneKeyTables() {}

  /**
   * Creates {@code table} with the string partition key {@code keyAttribute}, on-demand ({@code
   * PAY_PER_REQUEST}), unless it exists; then waits until it is {@code ACTIVE}.
   *
   * @return true when this call created the table
   * @throws IllegalStateException when the table does not become active within five minutes
   * @throws dev.nolock.patterns.BackendUnavailableException when DynamoDB failed
   */
  public static boolean createIfMissing(DynamoDbClient client, String table, String keyAttribute) {
    boolean created = false;
    try {
      if (status(client, table) == null) {
        try {
          client.createTable(
              create ->
                  create
                      .tableName(table)
                      .attributeDefinitions(
                          AttributeDefinition.builder()
                              .attributeName(keyAttribute)
                              .attributeType(ScalarAttributeType.S)
                              .build())
                      .keySchema(
                          KeySchemaElement.builder()
                              .attributeName(keyAttribute)
                              .keyType(KeyType.HASH)
                              .build())
                      .billingMode(BillingMode.PAY_PER_REQUEST));
          created = true;
        } catch (ResourceInUseException raced) {
          // Another process is creating it at the same moment: wait for it below.
        }
      }
      awaitActive(client, table);
      return created;
    } catch (SdkException e) {
      throw DynamoDbFailures.translate(e, "create the table", table, keyAttribute);
    }
  }

  private static TableStatus status(DynamoDbClient client, String table) {
    try {
      return client.describeTable(describe -> describe.tableName(table)).table().tableStatus();
    } catch (ResourceNotFoundException e) {
      return null;
    }
  }

  private static void awaitActive(DynamoDbClient client, String table) {
    long start = System.nanoTime();
    while (status(client, table) != TableStatus.ACTIVE) {
      if (System.nanoTime() - start > MAX_WAIT.toNanos()) {
        throw new IllegalStateException(
            "Table \"" + table + "\" did not become ACTIVE within " + MAX_WAIT + ".");
      }
      try {
        // Polling a control-plane operation; there is nothing to wait on but time.
        Thread.sleep(POLL.toMillis());
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("Interrupted while waiting for table " + table, e);
      }
    }
  }
}
