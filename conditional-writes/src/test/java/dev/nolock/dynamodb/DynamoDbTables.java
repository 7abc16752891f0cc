package dev.nolock.dynamodb;

import java.security.SecureRandom;
import java.util.HexFormat;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.ResourceNotFoundException;

/** Table names for tests: dynalite is shared by every test class, so each gets its own tables. */
final class DynamoDbTables {

  private static final SecureRandom RANDOM = new SecureRandom();

  private DynamoDbTables() {}

  /** {@code prefix} plus 12 random hex digits. */
  static String unique(String prefix) {
    byte[] bytes = new byte[6];
    RANDOM.nextBytes(bytes);
    return prefix + HexFormat.of().formatHex(bytes);
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
