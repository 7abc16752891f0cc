package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.ElectorConfig;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LeaderElector;
import dev.nolock.lock.Leadership;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link LeaderElector#close()} on PostgreSQL frees the lease only once the leader's work has
 * ended, so the successor waiting on the same row never overlaps it. The work ignores interrupts
 * and ends only when the test lets it, after it saw close() wait and nothing released. The lease
 * lasts 30 s and the test waits at most 20 s for the successor: it can only take over through the
 * release.
 */
@ExtendWith(PostgresExtension.class)
class PostgresLeaderCloseIT {

  private final List<String> events = new CopyOnWriteArrayList<>();

  private static ElectorConfig config(String identity) {
    return ElectorConfig.custom("close-order")
        .identity(identity)
        .leaseDuration(Duration.ofSeconds(30))
        .renewDeadline(Duration.ofSeconds(20))
        .retryPeriod(Duration.ofMillis(200))
        .haltOnLoss(false)
        .build();
  }

  @Test
  void theSuccessorStartsOnlyAfterTheClosedLeadersWorkEndedAndItReleased(PostgresSchema schema)
      throws Exception {
    PostgresLockBackend server = PostgresLockBackend.create(schema.dataSource());
    server.createTableIfMissing();
    AtomicReference<Thread> aWork = new AtomicReference<>();
    CountDownLatch aStarted = new CountDownLatch(1);
    CountDownLatch aMayEnd = new CountDownLatch(1);
    CountDownLatch bStarted = new CountDownLatch(1);
    CountDownLatch bSawA = new CountDownLatch(1);
    Leadership a =
        new Leadership() {
          @Override
          public void onStartedLeading(HeldLock leadership) {
            aWork.set(Thread.currentThread());
            aStarted.countDown();
            while (aMayEnd.getCount() > 0) {
              try {
                aMayEnd.await();
              } catch (InterruptedException ignored) {
                events.add("A: work interrupted, goes on");
              }
            }
            events.add("A: work ended");
          }

          @Override
          public void onStoppedLeading() {
            events.add("A: onStoppedLeading");
          }
        };
    Leadership b =
        new Leadership() {
          @Override
          public void onStartedLeading(HeldLock leadership) throws InterruptedException {
            events.add("B: started leading, A's work running: " + aWork.get().isAlive());
            bStarted.countDown();
            new CountDownLatch(1).await();
          }

          @Override
          public void onStoppedLeading() {}

          @Override
          public void onNewLeader(String identity) {
            if (identity.equals("A")) {
              bSawA.countDown();
            }
          }
        };
    LockBackend aBackend = new ReleasesRecorded(server, () -> aWork.get().isAlive());

    LeaderElector first = LeaderElector.start(aBackend, config("A"), a);
    try (LeaderElector second = startAfter(aStarted, server, b)) {
      bSawA.await(); // B campaigns against A's lease

      Thread closer = new Thread(first::close, "closer");
      closer.start();
      // close() waits for the work (TIMED_WAITING), or released at once (the bug), or returned.
      await()
          .until(
              () ->
                  events.contains("A: onStoppedLeading")
                          && closer.getState() == Thread.State.TIMED_WAITING
                      || events.stream().anyMatch(e -> e.startsWith("A: release"))
                      || !closer.isAlive());
      assertThat(events)
          .as("nothing released while A's work runs; events: %s", events)
          .noneMatch(e -> e.startsWith("A: release"));
      aMayEnd.countDown(); // the work ignores interrupts; it ends only now, from the test

      await("B leads").atMost(Duration.ofSeconds(20)).until(() -> bStarted.getCount() == 0);
      assertThat(events)
          .as("A released only after its work thread ended; events: %s", events)
          .contains("A: release, work running: false")
          .contains("B: started leading, A's work running: false");
      assertThat(events.indexOf("A: work ended"))
          .isNotNegative()
          .isLessThan(events.indexOf("B: started leading, A's work running: false"));
    } finally {
      aMayEnd.countDown();
      first.close();
    }
  }

  private static LeaderElector startAfter(
      CountDownLatch started, LockBackend backend, Leadership leadership)
      throws InterruptedException {
    started.await();
    return LeaderElector.start(backend, config("B"), leadership);
  }

  /** The PostgreSQL backend, recording whether the leader's work ran at each release. */
  private final class ReleasesRecorded implements LockBackend {
    private final LockBackend server;
    private final BooleanSupplier working;

    ReleasesRecorded(LockBackend server, BooleanSupplier working) {
      this.server = server;
      this.working = working;
    }

    @Override
    public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
      return server.tryAcquire(name, owner, ttl);
    }

    @Override
    public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
      return server.renew(name, owner, token, ttl);
    }

    @Override
    public boolean release(String name, String owner, FencingToken token) {
      events.add("A: release, work running: " + working.getAsBoolean());
      return server.release(name, owner, token);
    }

    @Override
    public Option<LeaseHolder> holder(String name) {
      return server.holder(name);
    }
  }
}
