package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.ChildJvm;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Collectors;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.awaitility.Awaitility;

/**
 * Owners of a topic's partitions, some in child JVMs that are frozen with SIGSTOP at their apply
 * gate or killed with {@code kill -9}, and one in this JVM that takes over. Steps of {@link #run}:
 *
 * <ol>
 *   <li>start the children and the owner in this JVM; wait until every instance owns its share of
 *       the partitions (the ownership table names each);
 *   <li>send the commands through a {@link KeyRouter};
 *   <li>each child to freeze stops at its gate (past its point-of-no-return check, right before an
 *       apply transaction, records fetched) and is frozen there with SIGSTOP; each child to kill is
 *       killed with {@code kill -9} while it applies;
 *   <li>wait until every partition those children owned has a newer epoch in the table (the group
 *       moved it and a new owner claimed it), and until the frozen children's gated records have
 *       been applied by their new owner;
 *   <li>resume the frozen children (stdin {@code GO}, then SIGCONT): each attempts its gated apply
 *       with its old epoch, then goes on (it rejoins the group as a new member);
 *   <li>wait until every command is applied, close everything, and read the bank's tables.
 * </ol>
 */
final class ZombieScenario {

  enum Fate {
    FREEZE,
    KILL
  }

  /** A child owner: its safeguards ({@code ALL}, {@code NO_EPOCH}, {@code NONE}) and fate. */
  record ChildSpec(String name, String safeguards, int gateAfter, Fate fate) {}

  record Outcome(int partition, long offset, long epoch, String result) {}

  /** What a frozen child did. */
  record Frozen(
      String name,
      int gatedPartition,
      long gatedOffset,
      long gatedEpoch,
      Map<Integer, Long> epochsAtGate,
      List<Outcome> staleOutcomes,
      int outcomesAfterRejoin) {}

  record Result(
      Bank.Report report,
      Map<String, Integer> sent,
      List<Frozen> frozen,
      Map<String, Integer> killedExitCodes,
      SimpleMeterRegistry takeoverMetrics,
      String timeline) {}

  private ZombieScenario() {}

  /**
   * @param awaitGatedApplied also keep the frozen children frozen until their gated records have
   *     been applied by the new owners, so that each resumed gated apply is a would-be duplicate
   */
  static Result run(
      KafkaBroker kafka,
      PostgresSchema pg,
      int partitions,
      int commandCount,
      int keyCount,
      List<ChildSpec> specs,
      boolean awaitGatedApplied)
      throws Exception {
    Timeline timeline = new Timeline();
    String topic = kafka.createTopic(kafka.uniqueTopicName("commands"), partitions);
    String group = "owners-" + topic;
    String suffix = UUID.randomUUID().toString().substring(0, 6);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    String takeoverId = "test-jvm-" + suffix;
    Map<String, ChildJvm> children = new LinkedHashMap<>();
    Map<String, String> ownerIds = new HashMap<>();
    Commands commands = new Commands(kafka.bootstrapServers(), topic, partitions, keyCount);
    PartitionOwner<String, String> takeover =
        PartitionOwner.create(
            pg.dataSource(),
            TestOwners.config(kafka.bootstrapServers(), topic, group, takeoverId)
                .metrics(registry, "test")
                .build(),
            new StringDeserializer(),
            new StringDeserializer(),
            Bank.handler(takeoverId));
    try {
      takeover.createTableIfMissing();
      Bank.freshTables(pg.dsl());

      // 1. Children first, then the owner in this JVM.
      for (ChildSpec spec : specs) {
        String ownerId = spec.name() + "-" + suffix;
        ownerIds.put(spec.name(), ownerId);
        children.put(
            spec.name(),
            ChildJvm.start(
                spec.name(),
                OwnerChildMain.class,
                kafka.bootstrapServers(),
                topic,
                group,
                pg.jdbcUrl(),
                ownerId,
                spec.safeguards(),
                Integer.toString(spec.gateAfter())));
      }
      for (ChildJvm child : children.values()) {
        child.awaitLine("STARTED", Duration.ofSeconds(60));
      }
      takeover.start();
      int instances = specs.size() + 1;
      Awaitility.await("every instance owns its share of the " + partitions + " partitions")
          .atMost(Duration.ofSeconds(90))
          .pollInterval(Duration.ofMillis(200))
          .until(
              () -> {
                Map<String, Long> perOwner =
                    OwnerRows.read(pg.dsl(), group, topic).values().stream()
                        .filter(r -> r.owner() != null)
                        .collect(
                            Collectors.groupingBy(OwnerRows.Row::owner, Collectors.counting()));
                return perOwner.size() == instances
                    && perOwner.values().stream().allMatch(n -> n == partitions / instances)
                    && takeover.ownedPartitions().size() == partitions / instances;
              });
      timeline.add(
          instances
              + " owners hold "
              + partitions / instances
              + " partitions each: "
              + OwnerRows.read(pg.dsl(), group, topic));

      // 2. The commands.
      commands.send(commandCount);
      timeline.add(commandCount + " commands over " + keyCount + " keys sent and acknowledged");

      // 3. Freeze at the gate; kill.
      Map<String, String[]> gates = new LinkedHashMap<>();
      for (ChildSpec spec : specs) {
        if (spec.fate() == Fate.FREEZE) {
          ChildJvm child = children.get(spec.name());
          String[] gate = child.awaitLine("GATE", Duration.ofSeconds(90));
          child.signal("STOP");
          child.awaitState('T');
          gates.put(spec.name(), gate);
          timeline.add(
              spec.name()
                  + " (pid "
                  + child.pid()
                  + ", safeguards "
                  + spec.safeguards()
                  + ") frozen with SIGSTOP at its gate: about to apply partition "
                  + gate[1]
                  + " offset "
                  + gate[2]
                  + " with epoch "
                  + gate[3]
                  + "; it owned "
                  + (gate.length > 4 ? gate[4] : "nothing"));
        }
      }
      Map<String, Integer> exitCodes = new LinkedHashMap<>();
      Map<String, Map<Integer, Long>> killedOwned = new LinkedHashMap<>();
      for (ChildSpec spec : specs) {
        if (spec.fate() == Fate.KILL) {
          ChildJvm child = children.get(spec.name());
          long appliedBefore = OwnerRows.appliedThrough(pg.dsl(), group, topic);
          child.signal("KILL");
          exitCodes.put(spec.name(), child.awaitExit(Duration.ofSeconds(30)));
          killedOwned.put(spec.name(), ownedFromLines(child.lines()));
          timeline.add(
              spec.name()
                  + " (pid "
                  + child.pid()
                  + ") killed with kill -9 while applying ("
                  + appliedBefore
                  + " of "
                  + commandCount
                  + " applied in all); it owned "
                  + killedOwned.get(spec.name()));
        }
      }

      // 4. Wait for the partitions to move, and for the gated records to be applied elsewhere.
      Map<Integer, Long> mustMove = new HashMap<>();
      gates.values().forEach(g -> mustMove.putAll(parseOwned(g)));
      killedOwned.values().forEach(mustMove::putAll);
      Awaitility.await("every partition of the frozen and killed owners has a newer epoch")
          .atMost(Duration.ofSeconds(90))
          .pollInterval(Duration.ofMillis(200))
          .until(
              () -> {
                Map<Integer, OwnerRows.Row> rows = OwnerRows.read(pg.dsl(), group, topic);
                return mustMove.entrySet().stream()
                    .allMatch(e -> rows.get(e.getKey()).epoch() > e.getValue());
              });
      timeline.add("their partitions moved: " + OwnerRows.read(pg.dsl(), group, topic));
      if (awaitGatedApplied) {
        Awaitility.await("the gated records are applied by the new owners")
            .atMost(Duration.ofSeconds(120))
            .pollInterval(Duration.ofMillis(200))
            .until(
                () -> {
                  Map<Integer, OwnerRows.Row> rows = OwnerRows.read(pg.dsl(), group, topic);
                  return gates.values().stream()
                      .allMatch(
                          g ->
                              rows.get(Integer.parseInt(g[1])).lastApplied()
                                  >= Long.parseLong(g[2]));
                });
        timeline.add("the gated records were applied by the partitions' new owners");
      }
      for (String name : gates.keySet()) {
        assertThat(children.get(name).isAlive()).as(name + " is still frozen").isTrue();
      }

      // 5. Resume the zombies.
      Map<Integer, OwnerRows.Row> atResume = OwnerRows.read(pg.dsl(), group, topic);
      for (Map.Entry<String, String[]> gate : gates.entrySet()) {
        ChildJvm child = children.get(gate.getKey());
        long appliedThere = atResume.get(Integer.parseInt(gate.getValue()[1])).lastApplied();
        timeline.add(
            gate.getKey()
                + "'s gated offset "
                + gate.getValue()[2]
                + (appliedThere >= Long.parseLong(gate.getValue()[2])
                    ? " has been applied by the new owner"
                    : " is not applied yet (the partition is applied up to " + appliedThere + ")"));
        child.go();
        child.signal("CONT");
        String[] first =
            child.awaitLine(
                line ->
                    line.startsWith(
                        "OUTCOME " + gate.getValue()[1] + " " + gate.getValue()[2] + " "),
                "OUTCOME of the gated record",
                Duration.ofSeconds(60));
        timeline.add(
            gate.getKey()
                + " resumed with SIGCONT; its gated apply with epoch "
                + first[3]
                + ": "
                + first[4]);
      }

      // 6. Everything applied; close; read.
      Awaitility.await("all " + commandCount + " commands applied")
          .atMost(Duration.ofSeconds(180))
          .pollInterval(Duration.ofMillis(250))
          .until(() -> OwnerRows.appliedThrough(pg.dsl(), group, topic) == commandCount);
      timeline.add(
          "all " + commandCount + " offsets applied: " + OwnerRows.read(pg.dsl(), group, topic));
      takeover.close();
      assertThat(takeover.failure().toJavaOptional())
          .as("the owner in this JVM stopped cleanly")
          .isEmpty();
      List<Frozen> frozen = new ArrayList<>();
      for (Map.Entry<String, String[]> gate : gates.entrySet()) {
        ChildJvm child = children.get(gate.getKey());
        child.stop();
        child.awaitLine("CLOSED", Duration.ofSeconds(60));
        assertThat(child.awaitExit(Duration.ofSeconds(30)))
            .as(gate.getKey() + " exit code")
            .isZero();
        frozen.add(frozen(gate.getKey(), gate.getValue(), child.lines()));
      }
      timeline.add("closed; zombies' outcomes: " + frozen);
      Bank.Report report = Bank.report(pg.dsl(), commands.sent());
      timeline.add("bank: " + report);
      return new Result(report, commands.sent(), frozen, exitCodes, registry, timeline.toString());
    } finally {
      takeover.close();
      commands.close();
      children.values().forEach(ChildJvm::close);
      System.out.println("Zombie scenario timeline:\n" + timeline);
    }
  }

  private static Frozen frozen(String name, String[] gate, List<String> lines) {
    Map<Integer, Long> atGate = parseOwned(gate);
    List<Outcome> stale = new ArrayList<>();
    int live = 0;
    for (String line : lines) {
      if (!line.startsWith("OUTCOME ")) {
        continue;
      }
      String[] w = line.split(" ");
      Outcome o =
          new Outcome(Integer.parseInt(w[1]), Long.parseLong(w[2]), Long.parseLong(w[3]), w[4]);
      if (atGate.containsKey(o.partition()) && atGate.get(o.partition()) == o.epoch()) {
        stale.add(o);
      } else {
        live++;
      }
    }
    return new Frozen(
        name,
        Integer.parseInt(gate[1]),
        Long.parseLong(gate[2]),
        Long.parseLong(gate[3]),
        atGate,
        stale,
        live);
  }

  /** {@code GATE p offset epoch p:e,p:e} → the partitions owned at the gate and their epochs. */
  private static Map<Integer, Long> parseOwned(String[] gate) {
    Map<Integer, Long> owned = new HashMap<>();
    if (gate.length > 4 && !gate[4].isEmpty()) {
      for (String pair : gate[4].split(",")) {
        String[] pe = pair.split(":");
        owned.put(Integer.parseInt(pe[0]), Long.parseLong(pe[1]));
      }
    }
    owned.put(Integer.parseInt(gate[1]), Long.parseLong(gate[3]));
    return owned;
  }

  /** The partitions a child owned, from its CLAIMED and RELEASED lines. */
  private static Map<Integer, Long> ownedFromLines(List<String> lines) {
    Map<Integer, Long> owned = new HashMap<>();
    for (String line : lines) {
      String[] w = line.split(" ");
      if (w[0].equals("CLAIMED")) {
        owned.put(Integer.parseInt(w[1]), Long.parseLong(w[2]));
      } else if (w[0].equals("RELEASED")) {
        owned.remove(Integer.parseInt(w[1]));
      }
    }
    return owned;
  }

  /** Events with the seconds since the scenario started. */
  private static final class Timeline {
    private final long start = System.nanoTime();
    private final StringBuilder text = new StringBuilder();

    synchronized void add(String event) {
      double seconds = (System.nanoTime() - start) / 1e9;
      text.append(String.format("  t=%6.1fs  %s%n", seconds, event));
    }

    @Override
    public synchronized String toString() {
      return text.toString();
    }
  }
}
