package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import dev.nolock.ownership.internal.ApplyOutcome;
import dev.nolock.ownership.internal.ApplyTransaction;
import dev.nolock.ownership.internal.OwnerTable;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.testkit.AttemptTokenContract;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Collectors;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.jooq.DSLContext;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestInstance.Lifecycle;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.testkit.engine.EngineTestKit;

/**
 * Partition ownership passes testkit's {@link AttemptTokenContract}: the attempt is an owner epoch,
 * the attempt token its value.
 *
 * <ul>
 *   <li><b>item</b>: partition 0 of a fresh topic name, registered in the ownership table as the
 *       runner does at start ({@link OwnerTable#register}, one partition);
 *   <li><b>claim</b>: this process claims the partition with the runner's own claim ({@link
 *       OwnerTable#claim}, which the runner calls from its rebalance callback): the epoch goes up
 *       by one and names the claimer. It never answers "empty": which member may claim is the
 *       consumer group's decision, not the table's;
 *   <li><b>lapse</b>: another member claims the partition, as after a rebalance that handed it
 *       over; the lapsed epoch's holder still has it in hand, as a paused owner would;
 *   <li><b>finish</b>: the runner's apply transaction ({@link ApplyTransaction}, what the runner
 *       runs per record) applies the partition's record at offset 0 under the epoch, and its
 *       handler writes one row to a ledger that has <b>no unique key</b>. {@code APPLIED} is
 *       FINISHED; {@code REPLAY} (the offset was applied before, and the row still carries this
 *       epoch and owner) is ALREADY_FINISHED; {@code FENCED} is STALE; "outcome unknown" is {@link
 *       dev.nolock.patterns.BackendUnavailableException};
 *   <li><b>finishWithFault</b>: the same apply through testkit's {@link JdbcFaults}, its {@code
 *       COMMIT} answer or request lost; the fault must fire;
 *   <li><b>effects</b>: the ledger's rows for the item.
 * </ul>
 *
 * Both steps are {@code internal}: the public {@link PartitionOwner} claims on assignment and
 * applies on its own thread as records arrive, so a caller can neither claim a partition nor finish
 * a chosen record under a chosen epoch, and the runner retries an unknown outcome by itself (what
 * it does around these two steps is tested with the broker in {@code LostCommitIT}). The
 * ConsumerRecord is built here, as a poll returns it: the apply transaction never talks to Kafka.
 *
 * <p>"Two attempts of one item in one process" run twice: one runner that claims its partition
 * again after a rebalance (both epochs carry one owner id, so only the epoch tells them apart), and
 * two runners in this JVM (each epoch carries its runner's owner id). The negative controls run the
 * same suite with one check of the apply switched off and must be caught.
 */
class OwnershipAttemptTokenContractIT {

  private static final String GROUP = "attempt-token-contract";
  private static final Duration TIMEOUT = Duration.ofSeconds(5);
  private static final OwnerTable TABLE = new OwnerTable(DSL.name(OwnershipConfig.DEFAULT_TABLE));

  /** An owner epoch of partition 0 of {@code topic}, claimed by {@code owner}. */
  record Epoch(String topic, String owner, long value) {}

  @Nested
  class OneRunnerClaimingItsPartitionAgain extends OwnershipContract {
    @Override
    String claimer(int nth) {
      return "runner-a";
    }
  }

  @Nested
  class TwoRunnersInThisJvm extends OwnershipContract {
    @Override
    String claimer(int nth) {
      return "runner-" + nth;
    }
  }

  @Test
  void withoutTheEpochCheckTheStaleAppliesAreCaught() {
    assertThat(failures(WithoutEpochCheck.class).keySet())
        .contains(
            "aStaleAttemptCannotFinishBeforeTheNewOne()",
            "aStaleAttemptCannotFinishAfterTheNewOne()",
            "aRetriedFinishOfAStaleAttemptIsStillStale()",
            "twoAttemptsOfOneItemInOneProcessAreEachAnsweredAsThemselves()");
  }

  @Test
  void withoutTheOffsetCheckALostCommitAnswerAndItsRetryCommitTwice() {
    Map<String, String> failures = failures(WithoutOffsetCheck.class);

    assertThat(failures)
        .containsKeys(
            "aFinishWhoseAnswerIsLostAndItsRetryEndAsOneSuccess()",
            "twoAttemptsOfOneItemInOneProcessAreEachAnsweredAsThemselves()");
    assertThat(failures.get("aFinishWhoseAnswerIsLostAndItsRetryEndAsOneSuccess()"))
        .contains("exactly one effect");
  }

  /** Runs {@code contract} through the JUnit engine: each failed test's name and message. */
  private static Map<String, String> failures(Class<?> contract) {
    return EngineTestKit.engine("junit-jupiter")
        .selectors(selectClass(contract))
        .execute()
        .testEvents()
        .failed()
        .stream()
        .collect(
            Collectors.toMap(
                e -> e.getTestDescriptor().getDisplayName(),
                e ->
                    e.getPayload(TestExecutionResult.class)
                        .flatMap(TestExecutionResult::getThrowable)
                        .map(String::valueOf)
                        .orElse("")));
  }

  /** The epoch check off: a zombie's apply is no longer refused as a whole. */
  static class WithoutEpochCheck extends OwnershipContract {
    WithoutEpochCheck() {
      super(new Safeguards(false, true));
    }

    @Override
    String claimer(int nth) {
      return "runner-a";
    }
  }

  /** The offset check off: nothing tells a retry of an apply that committed from a first apply. */
  static class WithoutOffsetCheck extends OwnershipContract {
    WithoutOffsetCheck() {
      super(new Safeguards(true, false));
    }

    @Override
    String claimer(int nth) {
      return "runner-a";
    }
  }

  @ExtendWith(PostgresExtension.class)
  @TestInstance(Lifecycle.PER_CLASS) // one pool per class
  abstract static class OwnershipContract extends AttemptTokenContract<Epoch> {

    private final Safeguards safeguards;
    private final Map<String, Integer> claims = new ConcurrentHashMap<>();
    private DSLContext dsl;
    private JdbcFaults faults;

    OwnershipContract() {
      this(Safeguards.ALL);
    }

    OwnershipContract(Safeguards safeguards) {
      this.safeguards = safeguards;
    }

    /** The owner id of this process's {@code nth} claim of an item (from 0). */
    abstract String claimer(int nth);

    @BeforeAll
    void tables(PostgresSchema pg) {
      dsl = pg.dsl();
      faults = JdbcFaults.pool(pg.jdbcUrl());
      TABLE.createTableIfMissing(dsl, Duration.ofSeconds(5));
      dsl.execute(
          "CREATE TABLE IF NOT EXISTS attempt_ledger (id bigserial PRIMARY KEY,"
              + " topic text NOT NULL, kafka_partition int NOT NULL, kafka_offset bigint NOT NULL,"
              + " epoch bigint NOT NULL, owner text NOT NULL)");
    }

    @AfterAll
    void closePool() {
      faults.close();
    }

    @Override
    protected String newItem() {
      String topic = "contract-" + UUID.randomUUID();
      TABLE.register(dsl, GROUP, topic, 1, TIMEOUT);
      return topic;
    }

    @Override
    protected Option<Epoch> claim(String topic) {
      String owner = claimer(claims.merge(topic, 1, Integer::sum) - 1);
      OwnerTable.Claim claim = TABLE.claim(dsl, GROUP, topic, 0, 1, owner, TIMEOUT, 0L);
      return Option.some(new Epoch(topic, owner, claim.epoch()));
    }

    @Override
    protected void lapse(String topic) {
      TABLE.claim(dsl, GROUP, topic, 0, 1, "another-member", TIMEOUT, 0L);
    }

    @Override
    protected long token(Epoch epoch) {
      return epoch.value();
    }

    @Override
    protected Finish finish(Epoch epoch) {
      ApplyTransaction<String, String> apply =
          new ApplyTransaction<>(
              faults.dsl(),
              TABLE,
              GROUP,
              epoch.owner(),
              (record, tx, token) ->
                  tx.execute(
                      "INSERT INTO attempt_ledger (topic, kafka_partition, kafka_offset, epoch,"
                          + " owner) VALUES (?, ?, ?, ?, ?)",
                      record.topic(),
                      record.partition(),
                      record.offset(),
                      token.value(),
                      epoch.owner()),
              safeguards,
              TIMEOUT,
              TIMEOUT,
              false,
              failure -> false);
      ApplyOutcome outcome =
          apply.apply(new ConsumerRecord<>(epoch.topic(), 0, 0L, "key", "command"), epoch.value());
      return switch (outcome) {
        case APPLIED -> Finish.FINISHED;
        case REPLAY -> Finish.ALREADY_FINISHED;
        case FENCED -> Finish.STALE;
        case DEAD_LETTERED -> throw new AssertionError("an apply never dead-letters: " + outcome);
      };
    }

    @Override
    protected Finish finishWithFault(Epoch epoch, FaultKind kind) {
      InjectedFault fault = faults.onNextCommit(kind);
      try {
        return finish(epoch);
      } finally {
        faults.disarmAll();
        fault.assertFired();
      }
    }

    @Override
    protected int effects(String topic) {
      return dsl.fetchOne("SELECT count(*) FROM attempt_ledger WHERE topic = ?", topic)
          .get(0, Integer.class);
    }
  }
}
