package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.ownership.ZombieScenario.ChildSpec;
import dev.nolock.ownership.ZombieScenario.Fate;
import dev.nolock.ownership.ZombieScenario.Frozen;
import dev.nolock.ownership.ZombieScenario.Outcome;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The main run: three owners of a 6-partition topic apply 10,000 commands over 200 keys. One owner
 * (a child JVM) is frozen with SIGSTOP at the point where it has fetched records and is about to
 * start an apply transaction, and stays frozen until its partitions have moved and its gated record
 * has been applied by the new owner; then it is resumed. Another owner (a child JVM) is killed with
 * {@code kill -9} while it applies. The third runs in this JVM.
 */
@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class ZombieOwnerIT {

  @Test
  void aFrozenOwnerIsRefusedAsAWholeAndAKilledOneLosesNothing(KafkaBroker kafka, PostgresSchema pg)
      throws Exception {
    long started = System.nanoTime();
    ZombieScenario.Result run =
        ZombieScenario.run(
            kafka,
            pg,
            6,
            10_000,
            200,
            List.of(
                new ChildSpec("zombie", "ALL", 150, Fate.FREEZE),
                new ChildSpec("killed", "ALL", 0, Fate.KILL)),
            false);

    Frozen zombie = run.frozen().get(0);
    System.out.printf(
        "Main run: %d commands over %d keys in %.1f s; zombie attempted %d apply(ies) with its"
            + " old epochs %s: %s; killed exit %s; %s%n",
        10_000,
        run.sent().size(),
        (System.nanoTime() - started) / 1e9,
        zombie.staleOutcomes().size(),
        zombie.epochsAtGate(),
        zombie.staleOutcomes(),
        run.killedExitCodes(),
        run.report());

    assertThat(zombie.staleOutcomes())
        .as("the resumed zombie attempted applies with its old epochs")
        .isNotEmpty()
        .first()
        .isEqualTo(
            new Outcome(
                zombie.gatedPartition(), zombie.gatedOffset(), zombie.gatedEpoch(), "FENCED"));
    assertThat(zombie.staleOutcomes())
        .as("every apply with an old epoch was refused by the ownership check")
        .extracting(Outcome::result)
        .containsOnly("FENCED");
    assertThat(run.killedExitCodes()).containsEntry("killed", 137);

    assertThat(run.sent().values().stream().mapToInt(Integer::intValue).sum()).isEqualTo(10_000);
    assertThat(run.sent()).hasSize(200);
    assertThat(run.report().wrongCounters())
        .as("every key's counter equals the commands sent for it")
        .isEmpty();
    assertThat(run.report().duplicates()).as("no command applied twice").isEmpty();
    assertThat(run.report().outOfOrder()).as("per-key order in the ledger").isEmpty();
    assertThat(run.report().notInOrderFlags()).as("per-key sequence checks at apply time").isZero();
    assertThat(run.report().ledgerRows()).isEqualTo(10_000);
    assertThat(run.report().counterTotal()).isEqualTo(10_000);
  }
}
