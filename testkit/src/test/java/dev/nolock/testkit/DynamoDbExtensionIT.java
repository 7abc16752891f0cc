package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.internal.UniqueNames;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
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

@ExtendWith(DynamoDbExtension.class)
class DynamoDbExtensionIT {

  // dynalite is shared by every test class: a random table name keeps this one's rows apart.
  private static final String TABLE = "nolock_t_" + UniqueNames.hex12();

  @BeforeAll
  static void createTable(DynamoDbClient dynamo) {
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
  static void deleteTable(DynamoDbClient dynamo) {
    dynamo.deleteTable(delete -> delete.tableName(TABLE));
  }

  @Test
  void conditionalPutRefusesASecondWriteOfTheSameKey(DynamoDbClient dynamo) {
    dynamo.putItem(putIfAbsent("order-1", "first"));

    assertThatThrownBy(() -> dynamo.putItem(putIfAbsent("order-1", "second")))
        .isInstanceOf(ConditionalCheckFailedException.class);

    Map<String, AttributeValue> stored =
        dynamo
            .getItem(
                get ->
                    get.tableName(TABLE)
                        .key(Map.of("pk", AttributeValue.fromS("order-1")))
                        .consistentRead(true))
            .item();
    assertThat(stored.get("writer").s())
        .as("the refused write left the first one in place")
        .isEqualTo("first");
  }

  private static PutItemRequest putIfAbsent(String key, String writer) {
    return PutItemRequest.builder()
        .tableName(TABLE)
        .item(Map.of("pk", AttributeValue.fromS(key), "writer", AttributeValue.fromS(writer)))
        .conditionExpression("attribute_not_exists(pk)")
        .build();
  }
}
