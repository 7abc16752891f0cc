package dev.nolock.lock.dynamodb;

import dev.nolock.dynamodb.OneKeyTables;
import java.security.SecureRandom;
import java.util.HexFormat;
import java.util.Map;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;
import software.amazon.awssdk.services.dynamodb.model.ResourceNotFoundException;

/** Tables and raw items for tests: dynalite is shared, so each test class gets its own table. */
final class LockTables {

  private static final SecureRandom RANDOM = new SecureRandom();

  private LockTables() {}

  /** {@code prefix} plus 12 random hex digits. */
  static String unique(String prefix) {
    byte[] bytes = new byte[6];
    RANDOM.nextBytes(bytes);
    return prefix + HexFormat.of().formatHex(bytes);
  }

  /** A backend on a new table of its own, created. */
  static DynamoDbLockBackend backendOnNewTable(DynamoDbClient dynamo, String prefix) {
    DynamoDbLockBackend backend =
        DynamoDbLockBackend.create(
            dynamo, DynamoDbLockBackendConfig.custom().tableName(unique(prefix)).build());
    backend.createTableIfMissing();
    return backend;
  }

  /** Creates a data table with the string partition key {@code pk}. */
  static void createDataTable(DynamoDbClient dynamo, String table) {
    // Polls every 500 ms; the SDK's waiter sleeps 20 s when the first describe says CREATING.
    OneKeyTables.createIfMissing(dynamo, table, "pk");
  }

  /** The lease item of {@code name}, read natively and consistently. */
  static Map<String, AttributeValue> item(
      DynamoDbClient dynamo, DynamoDbLockBackendConfig config, String name) {
    return dynamo
        .getItem(
            get ->
                get.tableName(config.tableName())
                    .key(Map.of(config.keyAttribute(), AttributeValue.fromS(name)))
                    .consistentRead(true))
        .item();
  }

  /** Rewrites the rvn of {@code name}'s lease item, as another writer would. */
  static void overwriteRvn(
      DynamoDbClient dynamo, DynamoDbLockBackendConfig config, String name, String rvn) {
    dynamo.updateItem(
        update ->
            update
                .tableName(config.tableName())
                .key(Map.of(config.keyAttribute(), AttributeValue.fromS(name)))
                .updateExpression("SET rvn = :rvn")
                .expressionAttributeValues(Map.of(":rvn", AttributeValue.fromS(rvn))));
  }

  /** Deletes {@code table} if it exists. */
  static void drop(DynamoDbClient dynamo, String table) {
    try {
      dynamo.deleteTable(delete -> delete.tableName(table));
    } catch (ResourceNotFoundException e) {
      // already gone
    }
  }
}
