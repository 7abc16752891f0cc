package dev.nolock.lock.dynamodb;

import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.DynamoDbExtension;
import dev.nolock.testkit.DynamoDbFaults;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.LockBackendLostAnswerContract;
import io.vavr.control.Option;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * The lost-answer contract on dynalite: owner A's backend sends through {@link DynamoDbFaults},
 * which loses the {@code UpdateItem} of each call or its answer; the backend resends it itself (the
 * SDK's retry is off for its conditional writes) and resolves the resend's refusal by reading the
 * item. Owner B's backend, and the peek, are other instances on a plain client.
 *
 * <p>Expiry here is the rvn observation: the peek reports a lease expired once its own instance has
 * watched the same rvn for the stored duration, and B takes a lease over once B's instance has (the
 * contract's takeover asks until it is granted). See {@link DynamoDbLockBackendIT}.
 */
@ExtendWith(DynamoDbExtension.class)
class DynamoDbLockBackendContractLostAnswerIT extends LockBackendLostAnswerContract {

  private static DynamoDbClient plain;
  private static DynamoDbLockBackendConfig config;

  private DynamoDbFaults faults;
  private DynamoDbLockBackend faulty;
  private DynamoDbLockBackend other;
  private DynamoDbLockBackend peeker;

  @BeforeAll
  static void createTable(DynamoDbClient client) {
    plain = client;
    config =
        DynamoDbLockBackendConfig.custom()
            .tableName(LockTables.unique("nolock_lost_contract_"))
            .build();
    DynamoDbLockBackend.create(plain, config).createTableIfMissing();
  }

  @AfterAll
  static void dropTable() {
    LockTables.drop(plain, config.tableName());
  }

  @BeforeEach
  void backends() {
    faults = DynamoDbFaults.create();
    faulty = DynamoDbLockBackend.create(faults.client(), config);
    other = DynamoDbLockBackend.create(plain, config);
    peeker = DynamoDbLockBackend.create(plain, config);
  }

  @AfterEach
  void closeFaults() {
    faults.close();
  }

  @Override
  protected LockBackend backend() {
    return other;
  }

  @Override
  protected LockBackend faultyBackend() {
    return faulty;
  }

  @Override
  protected Option<ObservedLease> peek(String name) {
    return peeker.inspect(name);
  }

  /** Acquire, renew and release each end in one conditional UpdateItem (after a GetItem). */
  @Override
  protected InjectedFault inject(Operation op, FaultKind kind, Runnable meanwhile) {
    return faults.onNext("UpdateItem", kind, meanwhile);
  }
}
