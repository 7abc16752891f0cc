package dev.nolock.lock.dynamodb;

import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.DynamoDbExtension;
import dev.nolock.testkit.DynamoDbFaults;
import dev.nolock.testkit.Endpoints;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.LockBackendProperties;
import io.vavr.control.Option;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * {@link LockBackendProperties} on dynalite: the backend under faults sends through {@link
 * DynamoDbFaults} (every conditional write is an {@code UpdateItem}), the plain one through an
 * ordinary client, on a table of this class's own.
 *
 * <p>DynamoDB stores no expiry, so "expired" is an observer's judgement: the peek asks both
 * instances ({@link DynamoDbLockBackend#inspect}), each of which judges its own grants by their
 * holders' deadlines (exactly as its own {@code renew} does) and others' by its watch, and keeps
 * the sooner end.
 */
class DynamoDbLockBackendPropertiesIT extends LockBackendProperties {

  private static DynamoDbClient client;
  private static DynamoDbFaults faults;
  private static DynamoDbLockBackendConfig config;
  private static DynamoDbLockBackend plain;
  private static DynamoDbLockBackend faulty;

  @BeforeContainer
  static void createTable() {
    client = DynamoDbExtension.newClient(Endpoints.fromEnvironment().dynamoDbEndpoint());
    faults = DynamoDbFaults.create();
    config =
        DynamoDbLockBackendConfig.custom().tableName(LockTables.unique("nolock_props_")).build();
    plain = DynamoDbLockBackend.create(client, config);
    plain.createTableIfMissing();
    faulty = DynamoDbLockBackend.create(faults.client(), config);
  }

  @AfterContainer
  static void dropTable() {
    LockTables.drop(client, config.tableName());
    faults.close();
    client.close();
  }

  @Override
  protected LockBackend backend() {
    return plain;
  }

  @Override
  protected LockBackend faultyBackend() {
    return faulty;
  }

  @Override
  protected Option<ObservedLease> peek(String name) {
    // Each instance judges the grants it made by their holders' deadlines and the others' by its
    // own watch, which starts later: the lease's end is the sooner of the two judgements.
    Option<ObservedLease> first = faulty.inspect(name);
    Option<ObservedLease> second = plain.inspect(name);
    if (first.isDefined()
        && second.isDefined()
        && first.get().version().equals(second.get().version())
        && first.get().waitLeft().compareTo(second.get().waitLeft()) < 0) {
      return first;
    }
    return second; // the later read, when the lease changed between the two
  }

  @Override
  protected InjectedFault inject(Operation op, FaultKind kind, Runnable meanwhile) {
    return faults.onNext("UpdateItem", kind, meanwhile);
  }
}
