package dev.nolock.ownership;

import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.ownership.internal.ApplyOutcome;
import dev.nolock.ownership.internal.OwnerEvents;
import dev.nolock.ownership.internal.Safeguards;
import dev.nolock.patterns.FencingToken;
import dev.nolock.testkit.ChildChannel;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import org.apache.kafka.common.serialization.StringDeserializer;

/**
 * An owner instance in a JVM of its own, for the tests that freeze one with SIGSTOP or kill one
 * with {@code kill -9}. Arguments: bootstrap servers, topic, group, JDBC URL, owner id, safeguards
 * ({@code ALL}, {@code NO_EPOCH}: the epoch check off, {@code NONE}: the epoch and offset checks
 * off), the apply attempt to stop at (0: never), and optionally where the gate is: {@code
 * BEFORE_APPLY} (the default) or {@code IN_HANDLER}: inside the apply transaction after its
 * ownership update took the row lock, so that a frozen child holds the lock, in the first handler
 * call after {@code ARM} (answered {@code ARMED}), whatever the apply attempt argument.
 *
 * <p>Speaks the {@link ChildChannel} protocol; events:
 *
 * <ul>
 *   <li>{@code STARTED <owner>}; {@code CLAIMED <p> <epoch> <lastApplied>}; {@code RELEASED <p>
 *       <why>};
 *   <li>{@code GATE <p> <offset> <epoch> <p:epoch,...>} at the gate: past the point-of-no-return
 *       check, right before the apply transaction (or inside it, in its handler), with the
 *       partitions owned then. It waits at the gate for {@code GO}; the test freezes it there with
 *       SIGSTOP. In the handler, {@code BACKEND <pid>} comes first: the PostgreSQL backend of the
 *       apply transaction, which holds the row lock;
 *   <li>after the gate, {@code OUTCOME <p> <offset> <epoch> APPLIED|REPLAY|FENCED} for every apply;
 *   <li>on {@code STOP}: closes the runner, reports {@code CLOSED}, exits 0. If the runner stops on
 *       its own: {@code FAILED <exception>}, exit 2; any other failure: {@code ERROR <exception>},
 *       exit 2.
 * </ul>
 */
public final class OwnerChildMain {

  private OwnerChildMain() {}

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0];
    String topic = args[1];
    String group = args[2];
    String jdbcUrl = args[3];
    String ownerId = args[4];
    Safeguards safeguards =
        switch (args[5]) {
          case "ALL" -> Safeguards.ALL;
          case "NO_EPOCH" -> new Safeguards(false, true);
          case "NONE" -> new Safeguards(false, false);
          default -> throw new IllegalArgumentException("safeguards: ALL, NO_EPOCH or NONE");
        };
    int gateAfter = Integer.parseInt(args[6]);
    boolean gateInHandler = args.length > 7 && args[7].equals("IN_HANDLER");
    if (args.length > 7 && !gateInHandler && !args[7].equals("BEFORE_APPLY")) {
      throw new IllegalArgumentException("gate: BEFORE_APPLY or IN_HANDLER");
    }

    ChildChannel channel = ChildChannel.open();
    try (HikariDataSource pool = ChildChannel.pool(jdbcUrl, 3, "child-" + ownerId)) {
      AtomicReference<PartitionOwner<String, String>> self = new AtomicReference<>();
      AtomicInteger attempts = new AtomicInteger();
      AtomicBoolean pastGate = new AtomicBoolean();
      Runnable gate =
          () -> {
            try {
              channel.gate();
            } catch (InterruptedException e) {
              Thread.currentThread().interrupt();
            }
            pastGate.set(true);
          };
      OwnerEvents events =
          new OwnerEvents() {

            @Override
            public void claimed(int partition, long epoch, long lastApplied) {
              channel.report("CLAIMED", partition, epoch, lastApplied);
            }

            @Override
            public void released(int partition, String why) {
              channel.report("RELEASED", partition, why);
            }

            @Override
            public void beforeApply(int partition, long offset, long epoch) {
              if (!gateInHandler && gateAfter > 0 && attempts.incrementAndGet() == gateAfter) {
                channel.report(gateLine(partition, offset, epoch, self.get().ownedPartitions()));
                gate.run();
              }
            }

            @Override
            public void outcome(int partition, long offset, long epoch, ApplyOutcome outcome) {
              if (pastGate.get()) {
                channel.report("OUTCOME", partition, offset, epoch, outcome);
              }
            }
          };
      OwnershipConfig config = TestOwners.config(bootstrap, topic, group, ownerId).build();
      RecordHandler<String, String> bank = Bank.handler(ownerId);
      RecordHandler<String, String> handler =
          (record, tx, epoch) -> {
            if (gateInHandler && channel.takeArm()) {
              channel.report("BACKEND", tx.fetchValue("SELECT pg_backend_pid()"));
              channel.report(
                  gateLine(
                      record.partition(),
                      record.offset(),
                      epoch.value(),
                      self.get().ownedPartitions()));
              gate.run();
            }
            bank.apply(record, tx, epoch);
          };
      try (PartitionOwner<String, String> owner =
          PartitionOwner.withSafeguards(
              pool,
              config,
              new StringDeserializer(),
              new StringDeserializer(),
              handler,
              safeguards,
              events)) {
        self.set(owner);
        owner.start();
        channel.report("STARTED", ownerId);
        while (!channel.awaitStop(Duration.ofMillis(200))) {
          if (!owner.isRunning()) {
            channel.report("FAILED", owner.failure().map(Throwable::toString).getOrElse("stopped"));
            System.exit(2);
          }
        }
      }
      channel.report("CLOSED");
    } catch (Throwable e) {
      channel.fail(e, 2);
    }
    System.exit(0);
  }

  private static String gateLine(
      int partition, long offset, long epoch, Map<Integer, FencingToken> owned) {
    return "GATE "
        + partition
        + " "
        + offset
        + " "
        + epoch
        + " "
        + owned.entrySet().stream()
            .map(e -> e.getKey() + ":" + e.getValue().value())
            .collect(Collectors.joining(","));
  }
}
