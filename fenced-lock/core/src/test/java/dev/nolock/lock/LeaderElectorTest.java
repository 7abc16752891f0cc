package dev.nolock.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.ManualLeaseClock;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class LeaderElectorTest {

  private final List<LeaderElector> electors = new ArrayList<>();
  private final AtomicInteger halts = new AtomicInteger();

  @AfterEach
  void close() {
    electors.forEach(LeaderElector::close);
  }

  /** Records what happened to one candidate; its work waits until interrupted. */
  private static final class Recorder implements Leadership {
    final AtomicReference<FencingToken> token = new AtomicReference<>();
    final CountDownLatch started = new CountDownLatch(1);
    final CountDownLatch stopped = new CountDownLatch(1);
    final CountDownLatch workInterrupted = new CountDownLatch(1);
    final List<String> leadersSeen = new CopyOnWriteArrayList<>();

    @Override
    public void onStartedLeading(HeldLock leadership) throws InterruptedException {
      token.set(leadership.lease().token());
      started.countDown();
      try {
        new CountDownLatch(1).await(); // the leader's work runs until leadership ends
      } finally {
        workInterrupted.countDown();
      }
    }

    @Override
    public void onStoppedLeading() {
      stopped.countDown();
    }

    @Override
    public void onNewLeader(String identity) {
      leadersSeen.add(identity);
    }
  }

  private ElectorConfig.Builder fast(String name, String identity) {
    return ElectorConfig.custom(name)
        .identity(identity)
        .leaseDuration(Duration.ofSeconds(3))
        .renewDeadline(Duration.ofSeconds(2))
        .retryPeriod(Duration.ofMillis(200))
        .halt(halts::incrementAndGet);
  }

  private LeaderElector start(InMemoryLockBackend backend, ElectorConfig config, Leadership l) {
    LeaderElector elector = LeaderElector.start(backend, config, l);
    electors.add(elector);
    return elector;
  }

  @Test
  void exactlyOneOfThreeCandidatesLeadsAndASuccessorTakesOverWithAHigherToken() throws Exception {
    InMemoryLockBackend backend = new InMemoryLockBackend();
    List<Recorder> recorders = List.of(new Recorder(), new Recorder(), new Recorder());
    List<LeaderElector> candidates = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      candidates.add(start(backend, fast("leader", "c" + i).build(), recorders.get(i)));
    }
    await().until(() -> candidates.stream().filter(LeaderElector::isLeader).count() == 1);
    await()
        .during(Duration.ofMillis(600))
        .atMost(Duration.ofSeconds(3))
        .until(() -> candidates.stream().filter(LeaderElector::isLeader).count() == 1);
    int first = indexOfLeader(candidates);
    FencingToken firstToken = recorders.get(first).token.get();

    candidates.get(first).close();

    assertThat(recorders.get(first).stopped.getCount()).isZero();
    assertThat(recorders.get(first).workInterrupted.await(10, TimeUnit.SECONDS))
        .as("the work thread was interrupted")
        .isTrue();
    await().until(() -> candidates.stream().filter(LeaderElector::isLeader).count() == 1);
    int second = indexOfLeader(candidates);
    assertThat(second).isNotEqualTo(first);
    await().until(() -> recorders.get(second).token.get() != null);
    assertThat(recorders.get(second).token.get().isNewerThan(firstToken)).isTrue();
    assertThat(halts).as("a graceful close does not halt").hasValue(0);
  }

  @Test
  void everyCandidateHearsOfEachNewLeaderOnceIncludingItselfWhenItWins() throws Exception {
    InMemoryLockBackend backend = new InMemoryLockBackend();
    Recorder a = new Recorder();
    Recorder b = new Recorder();
    Recorder c = new Recorder();
    LeaderElector first = start(backend, fast("leader", "a").build(), a);
    a.started.await();
    start(backend, fast("leader", "b").build(), b);
    start(backend, fast("leader", "c").build(), c);

    // Several retry periods pass: a follower is told once, not on every poll.
    await()
        .during(Duration.ofMillis(1000))
        .atMost(Duration.ofSeconds(5))
        .until(() -> b.leadersSeen.equals(List.of("a")) && c.leadersSeen.equals(List.of("a")));
    assertThat(a.leadersSeen).containsExactly("a");

    first.close();
    await().until(() -> b.started.getCount() == 0 || c.started.getCount() == 0);
    String winner = b.started.getCount() == 0 ? "b" : "c";
    Recorder loser = winner.equals("b") ? c : b;
    Recorder won = winner.equals("b") ? b : c;
    await().until(() -> loser.leadersSeen.equals(List.of("a", winner)));
    assertThat(won.leadersSeen).containsExactly("a", winner);
  }

  @Test
  void aLeaderWhoseRenewalIsRefusedStopsItsWorkAtOnceAndHalts() throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    InMemoryLockBackend backend = new InMemoryLockBackend(serverClock);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    Recorder a = new Recorder();
    start(backend, fast("leader", "a").metrics(registry).build(), a);
    a.started.await();

    serverClock.advance(Duration.ofSeconds(10)); // a's lease expires on the server (a paused)
    backend.tryAcquire("leader", "b", Duration.ofSeconds(30)).get();

    a.stopped.await();
    a.workInterrupted.await();
    await().until(() -> halts.get() == 1);
    assertThat(registry.get("nolock.leadership.losses").counter().count()).isEqualTo(1);
    assertThat(registry.get("nolock.leadership.changes").counter().count()).isEqualTo(1);
  }

  @Test
  void embeddersMayTurnTheHaltOff() throws Exception {
    ManualLeaseClock serverClock = new ManualLeaseClock();
    InMemoryLockBackend backend = new InMemoryLockBackend(serverClock);
    Recorder a = new Recorder();
    start(backend, fast("leader", "a").haltOnLoss(false).build(), a);
    a.started.await();

    serverClock.advance(Duration.ofSeconds(10));
    backend.tryAcquire("leader", "b", Duration.ofSeconds(30)).get();

    a.stopped.await();
    assertThat(halts).hasValue(0);
  }

  @Test
  void eachBadCombinationIsRefusedNamingTheInequality() {
    assertThatThrownBy(
            () ->
                ElectorConfig.custom("x")
                    .leaseDuration(Duration.ofSeconds(10))
                    .renewDeadline(Duration.ofSeconds(10))
                    .build())
        .hasMessageContaining("leaseDuration (PT10S) must be greater than renewDeadline")
        .hasMessageContaining("next leader starts");
    assertThatThrownBy(
            () ->
                ElectorConfig.custom("x")
                    .leaseDuration(Duration.ofSeconds(15))
                    .renewDeadline(Duration.ofSeconds(2))
                    .retryPeriod(Duration.ofSeconds(2))
                    .build())
        .hasMessageContaining("renewDeadline (PT2S) must be greater than retryPeriod x 1.2");
    assertThatThrownBy(() -> ElectorConfig.custom("x").retryPeriod(Duration.ofMillis(1)))
        .hasMessageContaining("retryPeriod must be between");
    assertThatThrownBy(() -> ElectorConfig.custom("")).hasMessageContaining("election name");
  }

  private static int indexOfLeader(List<LeaderElector> candidates) {
    for (int i = 0; i < candidates.size(); i++) {
      if (candidates.get(i).isLeader()) {
        return i;
      }
    }
    throw new AssertionError("no leader");
  }
}
