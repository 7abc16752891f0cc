package example;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.NotAcquired;
import dev.nolock.lock.etcd.EtcdLockBackend;
import dev.nolock.lock.etcd.EtcdLockConfig;
import dev.nolock.patterns.FencingToken;
import io.etcd.jetcd.Client;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.UUID;

/** Two instances take turns on one lock: one holder at a time, each grant a higher token. */
public final class Main {

  public static void main(String[] args) {
    Client etcd =
        Client.builder().endpoints(env("NOLOCK_ETCD_ENDPOINT", "http://127.0.0.1:2379")).build();
    // Give each application its own prefix; this run's own here, so runs never meet.
    EtcdLockConfig config =
        EtcdLockConfig.custom().keyPrefix("/example-" + UUID.randomUUID() + "/locks/").build();

    // Two instances of a service, each with its own lock facade (its own owner identity).
    try (FencedLock first = FencedLock.create(EtcdLockBackend.create(etcd, config), correctness());
        FencedLock second =
            FencedLock.create(EtcdLockBackend.create(etcd, config), correctness())) {
      Either<NotAcquired, FencingToken> firstTurn =
          first.withLock(
              "invoice-42",
              Duration.ofSeconds(10),
              Duration.ofSeconds(2),
              held -> {
                Option<HeldLock> meanwhile =
                    second.tryAcquire("invoice-42", Duration.ofSeconds(10));
                check(meanwhile.isEmpty(), "the second instance got the lock the first one holds");
                held.checkPointOfNoReturn(Duration.ofMillis(50)); // throws LeaseLostException
                // The protected write goes through the resource's fence with held.lease(), e.g.
                // Fence.onTable("nolock_fences").write(dsl, held.lease(), tx -> ...) for SQL.
                return held.token();
              });
      check(firstTurn.isRight(), "the first instance did not get the lock: " + firstTurn);
      System.out.println(
          "first holder, token " + firstTurn.get().value() + "; the second was refused");

      // Released: the second instance gets it now, with a higher token than every earlier grant.
      Either<NotAcquired, FencingToken> secondTurn =
          second.withLock(
              "invoice-42", Duration.ofSeconds(10), Duration.ofSeconds(2), held -> held.token());
      check(secondTurn.isRight(), "the second instance did not get the released lock");
      check(secondTurn.get().isNewerThan(firstTurn.get()), "the token did not grow: " + secondTurn);
      System.out.println("second holder, token " + secondTurn.get().value());
    } finally {
      etcd.close();
    }
    System.out.println("OK: one holder at a time, and each grant's token is higher");
  }

  private static LockConfig correctness() {
    return LockConfig.ofDefaults(LockPurpose.CORRECTNESS);
  }

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isBlank() ? fallback : value;
  }

  private static void check(boolean ok, String failure) {
    if (!ok) {
      System.err.println("FAILED: " + failure);
      System.exit(1);
    }
  }
}
