package dev.nolock.dynamodb;

import dev.nolock.patterns.VersionedStore;
import dev.nolock.testkit.DynamoDbExtension;
import dev.nolock.testkit.DynamoDbFaults;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.VersionedStoreLostAnswerContract;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * The shared lost-answer contract on dynalite: the store under test sends through {@link
 * DynamoDbFaults}, whose transport sends a request and then fails as a dropped connection would (or
 * fails before sending it), so that the store's own resend decides what happens next. The cases
 * only DynamoDB has (every attempt losing its answer, the fence) are in {@code
 * DynamoDbLostAnswerIT}.
 */
@ExtendWith(DynamoDbExtension.class)
class DynamoDbVersionedStoreLostAnswerIT extends VersionedStoreLostAnswerContract {

  private static final String TABLE = DynamoDbTables.unique("nolock_store_lost_");

  private static DynamoDbClient plain;
  private static DynamoDbVersionedStore<Long> healthy;

  private DynamoDbFaults faults;
  private DynamoDbVersionedStore<Long> faulty;

  @BeforeAll
  static void createTable(DynamoDbClient client) {
    plain = client;
    healthy =
        DynamoDbVersionedStore.create(
            plain, DynamoDbVersionedStoreConfig.custom(TABLE, AttributeCodec.longs()).build());
    healthy.createTableIfMissing();
  }

  @AfterAll
  static void dropTable() {
    DynamoDbTables.drop(plain, TABLE);
  }

  @BeforeEach
  void faultyClient() {
    faults = DynamoDbFaults.create();
    faulty =
        DynamoDbVersionedStore.create(
            faults.client(),
            DynamoDbVersionedStoreConfig.custom(TABLE, AttributeCodec.longs()).build());
  }

  @AfterEach
  void closeFaults() {
    faults.close();
  }

  @Override
  protected VersionedStore<String, Long> store() {
    return healthy;
  }

  @Override
  protected VersionedStore<String, Long> faultyStore() {
    return faulty;
  }

  @Override
  protected InjectedFault inject(Operation operation, FaultKind kind) {
    return faults.onNext(action(operation), kind);
  }

  @Override
  protected InjectedFault inject(Operation operation, FaultKind kind, Runnable meanwhile) {
    return faults.onNext(action(operation), kind, meanwhile);
  }

  private static String action(Operation operation) {
    return switch (operation) {
      case INSERT -> "PutItem";
      case COMPARE_AND_SET, UPDATE -> "UpdateItem";
      case DELETE -> "DeleteItem";
    };
  }
}
