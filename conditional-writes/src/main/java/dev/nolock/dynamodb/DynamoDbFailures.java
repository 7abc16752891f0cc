package dev.nolock.dynamodb;

import dev.nolock.patterns.BackendUnavailableException;
import software.amazon.awssdk.core.exception.SdkException;
import software.amazon.awssdk.services.dynamodb.model.DynamoDbException;
import software.amazon.awssdk.services.dynamodb.model.ResourceNotFoundException;

/**
 * Turns what the AWS SDK throws into what nolock promises: a missing table is an {@link
 * IllegalStateException} that names the table and how to create it; a request DynamoDB refuses as
 * invalid ({@code ValidationException}: a key attribute that does not match the table's key schema,
 * an item over 400 KB) is an {@link IllegalStateException} too, because retrying cannot help;
 * everything else (network, throttling, a server error) is a {@link BackendUnavailableException}:
 * retry later. A failed condition is not translated here: it is a lost race, which callers turn
 * into a value.
 *
 * <p>A building block for DynamoDB components (this module's store and fence, and the fenced lock's
 * DynamoDB backend), public so that every one reports a failure the same way.
 */
public final class DynamoDbFailures {

  private DynamoDbFailures() {}

  /**
   * The exception to throw for {@code e}, raised while doing {@code what} (e.g. "read item
   * \"order-42\"") on {@code table} whose partition key is {@code keyAttribute}.
   */
  public static RuntimeException translate(
      SdkException e, String what, String table, String keyAttribute) {
    if (e instanceof ResourceNotFoundException) {
      return new IllegalStateException(
          "Could not "
              + what
              + ": the DynamoDB table \""
              + table
              + "\" does not exist (in this"
              + " account, region and endpoint). Create it with createTableIfMissing(), or: aws"
              + " dynamodb create-table --table-name "
              + table
              + " --attribute-definitions"
              + " AttributeName="
              + keyAttribute
              + ",AttributeType=S --key-schema AttributeName="
              + keyAttribute
              + ",KeyType=HASH --billing-mode PAY_PER_REQUEST",
          e);
    }
    return translateOther(e, what, table, keyAttribute);
  }

  /**
   * Like {@link #translate}, for a table nolock does not own (the data table a fence guards): a
   * missing table is reported without offering to create it.
   */
  public static RuntimeException translateOnUserTable(
      SdkException e, String what, String table, String keyAttribute) {
    if (e instanceof ResourceNotFoundException) {
      return new IllegalStateException(
          "Could not "
              + what
              + ": the DynamoDB table \""
              + table
              + "\" does not exist (in this"
              + " account, region and endpoint). The fence guards items of your own table:"
              + " configure the table that holds them.",
          e);
    }
    return translateOther(e, what, table, keyAttribute);
  }

  private static RuntimeException translateOther(
      SdkException e, String what, String table, String keyAttribute) {
    if (e instanceof DynamoDbException dynamo
        && dynamo.awsErrorDetails() != null
        && "ValidationException".equals(dynamo.awsErrorDetails().errorCode())) {
      return new IllegalStateException(
          "DynamoDB refused to "
              + what
              + " on table \""
              + table
              + "\" as invalid: "
              + dynamo.awsErrorDetails().errorMessage()
              + ". Check that the configured key (\""
              + keyAttribute
              + "\") matches the table's key schema, names and types, and that the"
              + " item stays under 400 KB.",
          e);
    }
    return new BackendUnavailableException(
        "DynamoDB failed to "
            + what
            + " on table \""
            + table
            + "\" ("
            + e.getMessage()
            + "). Whether it took effect is unknown; retry later.",
        e);
  }
}
