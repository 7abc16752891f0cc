package dev.nolock.dynamodb;

import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.VersionedStore;
import dev.nolock.testkit.DynamoDbExtension;
import dev.nolock.testkit.DynamoDbFaults;
import dev.nolock.testkit.Endpoints;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.VersionedStoreProperties;
import java.time.Duration;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * {@link VersionedStoreProperties} on dynalite: the store under faults sends through {@link
 * DynamoDbFaults} ({@code insert} is a {@code PutItem}, {@code compareAndSet} and each attempt of
 * {@code update} an {@code UpdateItem}, {@code delete} a {@code DeleteItem}), the plain one (and
 * the reads) through an ordinary client, on a table of this class's own.
 */
class DynamoDbVersionedStorePropertiesIT extends VersionedStoreProperties {

  private static DynamoDbClient client;
  private static DynamoDbFaults faults;
  private static DynamoDbVersionedStore<Long> plain;
  private static DynamoDbVersionedStore<Long> faulty;

  @BeforeContainer
  static void createTable() {
    // jqwik runs no JUnit extension: the client is made here, as DynamoDbExtension makes its own.
    client = DynamoDbExtension.newClient(Endpoints.fromEnvironment().dynamoDbEndpoint());
    faults = DynamoDbFaults.create();
    DynamoDbVersionedStoreConfig<Long> config =
        DynamoDbVersionedStoreConfig.custom(
                DynamoDbTables.unique("nolock_store_props_"), AttributeCodec.longs())
            .retryPolicy(
                RetryPolicy.custom().maxAttempts(5).baseDelay(Duration.ofMillis(1)).build())
            .build();
    plain = DynamoDbVersionedStore.create(client, config);
    plain.createTableIfMissing();
    faulty = DynamoDbVersionedStore.create(faults.client(), config);
  }

  @AfterContainer
  static void dropTable() {
    DynamoDbTables.drop(client, plain.config().tableName());
    faults.close();
    client.close();
  }

  @Override
  protected VersionedStore<String, Long> store() {
    return plain;
  }

  @Override
  protected VersionedStore<String, Long> faultyStore() {
    return faulty;
  }

  @Override
  protected InjectedFault inject(Operation op, FaultKind kind) {
    // An update of a missing item reads and stops: its fault would fire on a later UpdateItem.
    faults.disarmAll();
    return faults.onNext(
        switch (op) {
          case INSERT -> "PutItem";
          case COMPARE_AND_SET, UPDATE -> "UpdateItem";
          case DELETE -> "DeleteItem";
        },
        kind);
  }
}
