package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.internal.UniqueNames;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;
import software.amazon.awssdk.services.dynamodb.model.AttributeDefinition;
import software.amazon.awssdk.services.dynamodb.model.AttributeValue;
import software.amazon.awssdk.services.dynamodb.model.BillingMode;
import software.amazon.awssdk.services.dynamodb.model.ConditionalCheckFailedException;
import software.amazon.awssdk.services.dynamodb.model.KeySchemaElement;
import software.amazon.awssdk.services.dynamodb.model.KeyType;
import software.amazon.awssdk.services.dynamodb.model.PutItemRequest;
import software.amazon.awssdk.services.dynamodb.model.ScalarAttributeType;

/**
 * {@link DynamoDbFaults} on dynalite: a lost answer is a write the server applied, the SDK's own
 * retry resends it, and a conditional resend then fails against the write it made itself, which is
 * the ambiguity the library's DynamoDB modules must resolve.
 */
@ExtendWith(DynamoDbExtension.class)
class DynamoDbFaultsIT {

  private static final String TABLE = "nolock_faults_" + UniqueNames.hex12();

  private static DynamoDbClient plain;
  private DynamoDbFaults faults;

  @BeforeAll
  static void createTable(DynamoDbClient dynamo) {
    plain = dynamo;
    dynamo.createTable(
        create ->
            create
                .tableName(TABLE)
                .attributeDefinitions(
                    AttributeDefinition.builder()
                        .attributeName("pk")
                        .attributeType(ScalarAttributeType.S)
                        .build())
                .keySchema(
                    KeySchemaElement.builder().attributeName("pk").keyType(KeyType.HASH).build())
                .billingMode(BillingMode.PAY_PER_REQUEST));
    dynamo.waiter().waitUntilTableExists(describe -> describe.tableName(TABLE));
  }

  @AfterAll
  static void deleteTable() {
    plain.deleteTable(delete -> delete.tableName(TABLE));
  }

  @BeforeEach
  void openFaults() {
    faults = DynamoDbFaults.create();
  }

  @AfterEach
  void closeFaults() {
    faults.close();
  }

  @Test
  void aLostAnswerIsAWriteTheServerAppliedAndTheSdkResendsIt() {
    DynamoDbFaults.Fault lost = faults.onNext("PutItem", FaultKind.ANSWER_LOST);

    // The SDK's retry resends the conditional put, which now meets the item its first send wrote.
    assertThatThrownBy(() -> faults.client().putItem(putIfAbsent("k-answer", "first")))
        .isInstanceOf(ConditionalCheckFailedException.class);

    lost.assertRetried();
    assertThat(lost.attempts()).as("the lost send and the SDK's resend").isEqualTo(2);
    assertThat(item("k-answer")).containsEntry("writer", AttributeValue.fromS("first"));
  }

  @Test
  void aLostRequestNeverReachesTheServerAndTheSdksResendWrites() {
    AtomicReference<Map<String, AttributeValue>> seenMeanwhile = new AtomicReference<>();
    DynamoDbFaults.Fault lost =
        faults.onNext("PutItem", FaultKind.REQUEST_LOST, () -> seenMeanwhile.set(item("k-req")));

    faults.client().putItem(putIfAbsent("k-req", "first"));

    lost.assertRetried();
    assertThat(seenMeanwhile.get()).as("nothing was written by the lost request").isEmpty();
    assertThat(item("k-req")).containsEntry("writer", AttributeValue.fromS("first"));
  }

  @Test
  void theMeanwhileActionRunsAfterTheServerAppliedTheLostRequest() {
    AtomicReference<Map<String, AttributeValue>> seenMeanwhile = new AtomicReference<>();
    DynamoDbFaults.Fault lost =
        faults.onNext("PutItem", FaultKind.ANSWER_LOST, () -> seenMeanwhile.set(item("k-mean")));

    assertThatThrownBy(() -> faults.client().putItem(putIfAbsent("k-mean", "first")))
        .isInstanceOf(ConditionalCheckFailedException.class);

    lost.assertFired();
    assertThat(seenMeanwhile.get()).containsEntry("writer", AttributeValue.fromS("first"));
  }

  @Test
  void aFaultFiresOnlyOnItsOperationAndOnlyOnce() {
    DynamoDbFaults.Fault onUpdate = faults.onNext("UpdateItem", FaultKind.ANSWER_LOST);
    DynamoDbFaults.Fault onPut = faults.onNext("PutItem", FaultKind.REQUEST_LOST);

    faults.client().putItem(putIfAbsent("k-once", "first"));
    faults.client().putItem(put("k-once", "second"));

    assertThat(onUpdate.fired()).isFalse();
    assertThat(onUpdate.attempts()).isZero();
    assertThatThrownBy(onUpdate::assertFired)
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("never fired");
    assertThat(onPut.fired()).isTrue();
    assertThat(onPut.attempts()).as("lost, resent, then one more put").isEqualTo(3);
    assertThat(item("k-once")).containsEntry("writer", AttributeValue.fromS("second"));
  }

  @Test
  void disarmAllDropsTheFaultsThatHaveNotFiredAndKeepsTheFiredOnesCounting() {
    DynamoDbFaults.Fault fired = faults.onNext("PutItem", FaultKind.REQUEST_LOST);
    faults.client().putItem(putIfAbsent("k-disarm", "first"));
    DynamoDbFaults.Fault left = faults.onNext("PutItem", FaultKind.ANSWER_LOST);

    faults.disarmAll();
    faults.client().putItem(put("k-disarm", "second"));

    assertThat(left.fired()).as("disarmed before the put").isFalse();
    assertThat(left.attempts()).isZero();
    assertThat(fired.attempts()).as("lost, resent, then the put after disarmAll").isEqualTo(3);
    assertThat(item("k-disarm")).containsEntry("writer", AttributeValue.fromS("second"));
  }

  @Test
  void withoutDisarmAllAFaultArmedForACallThatSentNothingFiresOnTheNext() {
    DynamoDbFaults.Fault left = faults.onNext("PutItem", FaultKind.REQUEST_LOST);

    faults.client().putItem(put("k-left", "second"));

    assertThat(left.fired()).isTrue();
  }

  @Test
  void anOperationThatIsNoDynamoDbActionIsRefused() {
    assertThatThrownBy(() -> faults.onNext("updateItem ", FaultKind.ANSWER_LOST))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("\"UpdateItem\"");
  }

  private static Map<String, AttributeValue> item(String key) {
    return plain
        .getItem(
            get ->
                get.tableName(TABLE)
                    .key(Map.of("pk", AttributeValue.fromS(key)))
                    .consistentRead(true))
        .item();
  }

  private static PutItemRequest putIfAbsent(String key, String writer) {
    return put(key, writer).toBuilder().conditionExpression("attribute_not_exists(pk)").build();
  }

  private static PutItemRequest put(String key, String writer) {
    return PutItemRequest.builder()
        .tableName(TABLE)
        .item(Map.of("pk", AttributeValue.fromS(key), "writer", AttributeValue.fromS(writer)))
        .build();
  }
}
