package dev.nolock.dynamodb;

import java.nio.charset.StandardCharsets;
import java.util.regex.Pattern;

/**
 * Validation of the names that reach DynamoDB, by DynamoDB's own rules, so that a bad name is
 * refused with a message that says how to fix it before any request is sent.
 *
 * <p>A building block for the configurations of DynamoDB components (this module's and the fenced
 * lock's DynamoDB backend), public so that every one applies the same rules.
 */
public final class DynamoDbNames {

  /** DynamoDB's limit on an attribute name (and on a partition key attribute's name). */
  public static final int MAX_ATTRIBUTE_NAME_BYTES = 255;

  /** DynamoDB's limit on the value of a partition key. */
  public static final int MAX_PARTITION_KEY_BYTES = 2048;

  private static final Pattern TABLE_NAME = Pattern.compile("[a-zA-Z0-9_.-]{3,255}");

  private DynamoDbNames() {}

  /**
   * A table name by DynamoDB's rules: 3 to 255 characters, each a letter, digit, {@code _}, {@code
   * .} or {@code -}.
   *
   * @return {@code value}, for assignment
   */
  public static String requireTableName(String value) {
    if (value == null || !TABLE_NAME.matcher(value).matches()) {
      throw new IllegalArgumentException(
          "The DynamoDB table name "
              + (value == null ? "is null" : "\"" + value + "\" is invalid")
              + ": DynamoDB accepts 3 to 255 characters from [a-zA-Z0-9_.-], e.g."
              + " \"nolock_versions\".");
    }
    return value;
  }

  /**
   * An attribute name from configuration: 1 to 255 bytes of UTF-8, no control characters. Every
   * name goes into requests as an expression attribute name ({@code #name}), so DynamoDB's reserved
   * words ({@code value}, {@code name}, ...) are allowed.
   *
   * @param what what the attribute holds, for the message ("version attribute")
   */
  public static String requireAttributeName(String what, String value) {
    if (value == null || value.isEmpty()) {
      throw new IllegalArgumentException(
          "The "
              + what
              + " name is "
              + (value == null ? "null" : "empty")
              + ": pass the name of"
              + " the DynamoDB attribute, e.g. \"rvn\".");
    }
    if (value.getBytes(StandardCharsets.UTF_8).length > MAX_ATTRIBUTE_NAME_BYTES) {
      throw new IllegalArgumentException(
          "The "
              + what
              + " name \""
              + value.substring(0, 20)
              + "...\" is longer than "
              + MAX_ATTRIBUTE_NAME_BYTES
              + " bytes of UTF-8, DynamoDB's limit: shorten it.");
    }
    for (int i = 0; i < value.length(); i++) {
      if (Character.isISOControl(value.charAt(i))) {
        throw new IllegalArgumentException(
            "The "
                + what
                + " name contains a control character at index "
                + i
                + ": use"
                + " printable characters only.");
      }
    }
    return value;
  }

  /**
   * The value of a string partition key: not empty, at most 2048 bytes of UTF-8.
   *
   * @param what what the key identifies, for the message ("item id")
   */
  public static String requirePartitionKey(String what, String value) {
    if (value == null) {
      throw new IllegalArgumentException(
          "The " + what + " is null: pass the partition key value of the item, e.g. \"order-42\".");
    }
    if (value.isEmpty()) {
      throw new IllegalArgumentException(
          "The " + what + " is empty: DynamoDB refuses an empty string as a key value.");
    }
    if (value.length() > MAX_PARTITION_KEY_BYTES / 4
        && value.getBytes(StandardCharsets.UTF_8).length > MAX_PARTITION_KEY_BYTES) {
      throw new IllegalArgumentException(
          "The "
              + what
              + " \""
              + value.substring(0, 20)
              + "...\" is longer than "
              + MAX_PARTITION_KEY_BYTES
              + " bytes of UTF-8, DynamoDB's limit for a partition key:"
              + " shorten it or hash the long part.");
    }
    return value;
  }
}
