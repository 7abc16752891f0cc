package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.ForwardingLockBackend;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.NotAcquired;
import dev.nolock.lock.ReleaseOutcome;
import dev.nolock.lock.TimersNeverFire;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import dev.nolock.testkit.TcpProxy;
import io.lettuce.core.AclSetuserArgs;
import io.lettuce.core.KillArgs;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.protocol.CommandType;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Waiting for a held lock on Redis: callers with a backend and a {@link FencedLock} each (as
 * separate processes have) are served in the order they began to wait, a release wakes them through
 * the release channel, and a waiter that died holds the others up only until its place expires.
 * Each with the control that shows what happens without the protection.
 *
 * <p>Most tests run the waiters on a clock whose timers never fire ({@link TimersNeverFire}): a
 * waiter then asks again only when the backend wakes it, so the order and the wake-ups are the
 * backend's doing, not the luck of the jittered backoff.
 */
@ExtendWith(RedisExtension.class)
class RedisWaitingInTurnIT {

  private static final Duration TTL = Duration.ofSeconds(30);
  private static final Duration LONG_WAIT = Duration.ofMinutes(5);

  private final RedisURI uri;
  private final RedisClient client;
  private final RedisLockBackendConfig config;
  private final StatefulRedisConnection<String, String> direct;
  private final RedisCommands<String, String> redis;
  private final String name = "report-" + UUID.randomUUID();
  private final List<AutoCloseable> closing = new ArrayList<>();
  private final ExecutorService threads = Executors.newCachedThreadPool();

  RedisWaitingInTurnIT(RedisURI uri, RedisKeys keys) {
    this.uri = uri;
    // A client of its own, named, so that a test can find its subscription among the server's.
    this.client =
        RedisClient.create(
            RedisURI.builder(uri).withClientName("nolock-wait-" + UUID.randomUUID()).build());
    this.config = RedisLockBackendConfig.custom().keyPrefix(keys.key("lock:")).build();
    this.direct = client.connect();
    this.redis = direct.sync();
  }

  @AfterEach
  void close() throws Exception {
    threads.shutdownNow(); // ends the waits on a clock whose timers never fire
    for (int i = closing.size() - 1; i >= 0; i--) {
      closing.get(i).close();
    }
    direct.close();
    client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
  }

  /**
   * Three waiters queue behind a holder; the holder releases and at once asks again. Each waiter is
   * served in the order it began to wait, and the holder, now the last to ask, comes after them.
   */
  @Test
  void waitersAreServedInTheOrderTheyBeganToWaitAndTheReleaserQueuesBehindThem() throws Exception {
    List<String> served = servedOrder(this::newBackend, Duration.ZERO);

    await().atMost(Duration.ofSeconds(30)).until(() -> served.size() == 4);
    assertThat(served).containsExactly("w1", "w2", "w3", "holder");
  }

  /**
   * Negative control: the same backend seen only as a plain {@link LockBackend} (no queue, no
   * wake-ups), as before the queue. The holder asks again right after its release and takes the
   * lock ahead of all three waiters, whose timers have not fired.
   */
  @Test
  void withoutTheQueueTheReleaserTakesTheLockAgainAheadOfTheWaiters() throws Exception {
    List<String> served = servedOrder(() -> plain(newBackend()), Duration.ZERO);

    await().atMost(Duration.ofSeconds(30)).until(() -> !served.isEmpty());
    assertThat(served.get(0)).isEqualTo("holder");
  }

  /**
   * The default patience: the waiters have waited far longer than 20 ms by the time of the release,
   * so the releaser queues behind them as with strict order.
   */
  @Test
  void withTheDefaultPatienceWaitersThatWaitedLongerAreServedFirst() throws Exception {
    List<String> served = servedOrder(this::newBackend, LockConfig.DEFAULT_PATIENCE);

    await().atMost(Duration.ofSeconds(30)).until(() -> served.size() == 4);
    assertThat(served).containsExactly("w1", "w2", "w3", "holder");
  }

  /**
   * The patience rule on the script itself: three places queue behind a holder, the holder
   * releases, and a newcomer asks at once. Waiters that let newer callers go ahead for a minute let
   * it take the lock; waiters with zero patience do not, and the newcomer queues.
   */
  @Test
  void waitersWithinTheirPatienceLetANewcomerGoAheadAndWithZeroTheyDoNot() {
    assertThat(newcomerAfterTheRelease(name + "-patient", LockConfig.MAX_PATIENCE))
        .as("behind waiters patient for a minute")
        .isNotEmpty();
    assertThat(newcomerAfterTheRelease(name + "-strict", Duration.ZERO))
        .as("behind waiters with zero patience")
        .isEmpty();
  }

  private Option<FencingToken> newcomerAfterTheRelease(String lockName, Duration waitersPatience) {
    RedisLockBackend backend = newBackend();
    FencingToken held = backend.tryAcquire(lockName, "h#0", TTL).get();
    for (String waiter : List.of("w1", "w2", "w3")) {
      assertThat(
              backend.tryAcquireInTurn(lockName, waiter + "#0", TTL, waiter, TTL, waitersPatience))
          .isEmpty();
    }
    assertThat(backend.release(lockName, "h#0", held)).isTrue();
    return backend.tryAcquireInTurn(
        lockName, "newcomer#0", TTL, "newcomer", TTL, LockConfig.MAX_PATIENCE);
  }

  /**
   * A step back of the server's clock, as the queue sees it: a waiter's place records times an hour
   * ahead of the clock. A newcomer then joins behind it all the same, and once the lease is free
   * the waiter is served, the newcomer (out of patience at once) not counting as ahead. Control:
   * the newcomer's place moved before the waiter's, as joining at the clock alone would put it,
   * keeps the waiter out.
   */
  @Test
  void afterAStepBackOfTheClockANewcomerStillJoinsBehindTheWaiters() {
    assertThat(waiterAfterAStepBack(name + "-ordered", false)).as("the waiter").isNotEmpty();
    assertThat(waiterAfterAStepBack(name + "-at-the-clock", true))
        .as("the waiter, with the newcomer ahead of it")
        .isEmpty();
  }

  private Option<FencingToken> waiterAfterAStepBack(String lockName, boolean newcomerAtTheClock) {
    RedisLockBackend backend = newBackend();
    FencingToken held = backend.tryAcquire(lockName, "h#0", TTL).get();
    assertThat(backend.tryAcquireInTurn(lockName, "w#0", TTL, "w", TTL, Duration.ZERO)).isEmpty();
    double hour = Duration.ofHours(1).toMillis();
    for (String key : config.queueKeys(lockName)) {
      redis.zincrby(key, hour, "w");
    }
    assertThat(backend.tryAcquireInTurn(lockName, "n#0", TTL, "n", TTL, Duration.ZERO)).isEmpty();
    String queue = config.queueKeys(lockName).get(0);
    if (newcomerAtTheClock) {
      redis.zadd(queue, redis.zscore(queue, "w") - hour, "n");
    }
    assertThat(backend.release(lockName, "h#0", held)).isTrue();
    return backend.tryAcquireInTurn(lockName, "w#1", TTL, "w", TTL, Duration.ZERO);
  }

  /** A waiter whose timers never fire is woken by the release alone, and takes the lock. */
  @Test
  void aReleaseWakesAWaiterWhoseTimersNeverFire() throws Exception {
    Future<Either<NotAcquired, HeldLock>> waiting = waitOnTimersThatNeverFire(newBackend());

    await().atMost(Duration.ofSeconds(30)).until(waiting::isDone);
    assertThat(waiting.get().isRight()).as("acquired after the release").isTrue();
  }

  /**
   * Negative control: a backend made on a connection ({@link RedisLockBackend#create}) has no
   * client to subscribe with; the same waiter is never told: the lease is free and it still waits.
   * (It polls, without a place: a waiter nobody wakes must not hold the queue up.)
   */
  @Test
  void onABackendMadeOnAConnectionTheSameWaiterIsNeverWoken() throws Exception {
    RedisLockBackend backend = RedisLockBackend.create(direct, config);
    assertThat(backend.wakesWaiters()).isFalse();
    Future<Either<NotAcquired, HeldLock>> waiting = waitOnTimersThatNeverFire(backend);

    // Holding a condition for a while is an assertion, not a synchronisation.
    await()
        .during(Duration.ofSeconds(3))
        .atMost(Duration.ofSeconds(5))
        .until(() -> !waiting.isDone() && freeNow());
  }

  /**
   * The subscription's connection is killed while a waiter waits: Lettuce reconnects and subscribes
   * again, which wakes the waiter once, and the next release still wakes it, whose timers never
   * fire.
   */
  @Test
  void afterTheSubscriptionIsKilledItComesBackAndTheReleaseStillWakes() throws Exception {
    RedisLockBackend backend = newBackend();
    FencedLock holder = lock(backend, LeaseClock.system(), LockConfig.DEFAULT_PATIENCE);
    TimersNeverFire timers = new TimersNeverFire();
    FencedLock waiter = lock(backend, timers, LockConfig.DEFAULT_PATIENCE);
    HeldLock held = holder.tryAcquire(name, TTL).get();
    Future<Either<NotAcquired, HeldLock>> waiting =
        threads.submit(() -> waiter.acquire(name, TTL, LONG_WAIT));
    // Subscribed, and its first wake-up answered (the waiter waits again).
    await().atMost(Duration.ofSeconds(10)).until(() -> timers.waits() >= 2);
    int waitsBefore = timers.waits();

    long killed = killSubscription();
    assertThat(killed).as("subscriptions killed").isOne();
    // Subscribed again (the waiter, woken once more, asked and waits again) before the release.
    await().atMost(Duration.ofSeconds(20)).until(() -> timers.waits() > waitsBefore);
    await().atMost(Duration.ofSeconds(10)).until(() -> subscriptionIds().size() == 1);
    held.release();

    await().atMost(Duration.ofSeconds(30)).until(waiting::isDone);
    assertThat(waiting.get().isRight()).as("woken after the subscription came back").isTrue();
  }

  /**
   * A waiter that died at the head of the queue (it asked once and never again) holds the lock up
   * only until its place expires; the next waiter then takes the free lock, and the queue's keys
   * are gone with it.
   */
  @Test
  void aWaiterThatDiedLosesItsPlaceAndTheNextIsServed() {
    FencedLock next = lock(newBackend(), LeaseClock.system(), Duration.ZERO);
    deadWaiterAheadOfAFreeLock(Duration.ofSeconds(2));

    Either<NotAcquired, HeldLock> acquired = next.acquire(name, TTL, Duration.ofSeconds(30));

    assertThat(acquired.isRight()).as("served once the dead waiter's place expired").isTrue();
    assertThat(redis.exists(config.queueKeys(name).toArray(String[]::new)))
        .as("queue keys left")
        .isZero();
  }

  /**
   * Negative control: a dead waiter whose place never expires keeps the next waiter out of a free
   * lock for as long as it waits: the queue is what holds it up, and only the expiry frees it.
   */
  @Test
  void aPlaceThatNeverExpiresKeepsTheNextWaiterOutOfAFreeLock() {
    FencedLock next = lock(newBackend(), LeaseClock.system(), Duration.ZERO);
    deadWaiterAheadOfAFreeLock(Duration.ofHours(1));

    Either<NotAcquired, HeldLock> acquired = next.acquire(name, TTL, Duration.ofSeconds(3));

    assertThat(acquired.isLeft()).as("still waiting behind the dead waiter").isTrue();
    assertThat(freeNow()).as("the lease itself is free").isTrue();
  }

  /** A waiter that gives up leaves no place behind for the next to wait out. */
  @Test
  void aWaiterThatGivesUpLeavesTheQueue() {
    RedisLockBackend backend = newBackend();
    FencedLock holder = lock(backend, LeaseClock.system(), LockConfig.DEFAULT_PATIENCE);
    FencedLock waiter = lock(backend, LeaseClock.system(), LockConfig.DEFAULT_PATIENCE);
    HeldLock held = holder.tryAcquire(name, TTL).get();

    Either<NotAcquired, HeldLock> gaveUp = waiter.acquire(name, TTL, Duration.ofMillis(300));

    assertThat(gaveUp.isLeft()).isTrue();
    assertThat(gaveUp.getLeft().attempts()).as("it waited in the queue").isGreaterThan(1);
    assertThat(places()).as("places left behind").isZero();
    held.release();
  }

  /**
   * The in-turn script's answer is lost with its connection; Lettuce reconnects and sends it again
   * by itself, as in production. The resend finds the grant of its first run and answers its token:
   * one grant, the counter bumped once, no place left.
   */
  @Test
  void anInTurnGrantWhoseAnswerWasLostIsAnsweredOnceByTheResend() {
    RedisLockBackend backend = newBackend();
    redis.scriptLoad(RedisScripts.ACQUIRE_IN_TURN.source()); // no NOSCRIPT may take the fault
    try (TcpProxy proxy = TcpProxy.start(uri.getHost(), uri.getPort())) {
      RedisClient proxiedClient =
          RedisClient.create(RedisURI.builder(uri).withPort(proxy.port()).build());
      try (StatefulRedisConnection<String, String> proxied = proxiedClient.connect()) {
        RedisLockBackend faulty = RedisLockBackend.create(proxied, config);
        InjectedFault lost = proxy.loseNext(FaultKind.ANSWER_LOST);

        Option<FencingToken> token =
            faulty.tryAcquireInTurn(name, "A#1", TTL, "A-waiter", TTL, Duration.ZERO);

        assertThat(lost.fired()).as("the answer was lost").isTrue();
        assertThat(token).as("the resend's answer").isNotEmpty();
        assertThat(backend.holder(name)).contains(new LeaseHolder("A#1", token.get()));
        assertThat(redis.get(config.counterKey(name)))
            .as("grants made")
            .isEqualTo(Long.toString(token.get().value()))
            .isEqualTo("1");
        assertThat(places()).as("places left").isZero();
      } finally {
        proxiedClient.shutdown(Duration.ZERO, Duration.ofSeconds(1));
      }
    }
  }

  /**
   * A refused in-turn attempt whose answer is lost, seen through {@link FencedLock}: Lettuce sends
   * the script again, the resend only refreshes the waiter's place and is refused too, so the
   * caller keeps waiting (no failure, no second place) and is served once the holder releases, with
   * one grant of its own.
   */
  @Test
  void aRefusedInTurnAttemptWhoseAnswerWasLostKeepsOnePlaceAndIsServedAfterTheRelease()
      throws Exception {
    RedisLockBackend backend = newBackend();
    FencingToken held = backend.tryAcquire(name, "h#0", TTL).get();
    redis.scriptLoad(RedisScripts.ACQUIRE_IN_TURN.source()); // no NOSCRIPT may take the fault
    try (TcpProxy proxy = TcpProxy.start(uri.getHost(), uri.getPort())) {
      RedisClient proxiedClient =
          RedisClient.create(RedisURI.builder(uri).withPort(proxy.port()).build());
      try (RedisLockBackend waiterBackend = RedisLockBackend.connect(proxiedClient, config);
          var subscribed = waiterBackend.onRelease(name, "warm-up", () -> {})) {
        // The subscription is open before the fault is armed, so that the answer lost is the
        // in-turn script's and not the subscription's confirmation.
        await().atMost(Duration.ofSeconds(10)).until(waiterBackend::wakesWaiters);
        FencedLock waiter = lock(waiterBackend, LeaseClock.system(), Duration.ZERO);
        InjectedFault lost = proxy.loseNext(FaultKind.ANSWER_LOST);

        Future<Either<NotAcquired, HeldLock>> waiting =
            threads.submit(() -> waiter.acquire(name, TTL, Duration.ofSeconds(30)));

        await().atMost(Duration.ofSeconds(10)).until(lost::fired);
        await().atMost(Duration.ofSeconds(10)).until(() -> places() == 1);
        assertThat(waiting.isDone()).as("still waiting: %s", waiting).isFalse();
        assertThat(backend.release(name, "h#0", held)).isTrue();

        Either<NotAcquired, HeldLock> acquired = waiting.get(30, TimeUnit.SECONDS);
        assertThat(acquired.isRight()).as("served after the release: %s", acquired).isTrue();
        assertThat(acquired.get().token().value())
            .as("one grant after the holder's")
            .isEqualTo(held.value() + 1);
        assertThat(places()).as("places left").isZero();
        acquired.get().release();
      } finally {
        proxiedClient.shutdown(Duration.ZERO, Duration.ofSeconds(1));
      }
    }
  }

  /**
   * A place whose expiry was lost (its key evicted or deleted) would never expire; the scripts drop
   * it, and the next waiter is served. (The control is {@link
   * #aPlaceThatNeverExpiresKeepsTheNextWaiterOutOfAFreeLock}: the same dead waiter with its expiry
   * kept holds the next out.)
   */
  @Test
  void aPlaceThatLostItsExpiryIsDroppedAndTheNextIsServed() {
    FencedLock next = lock(newBackend(), LeaseClock.system(), Duration.ZERO);
    deadWaiterAheadOfAFreeLock(Duration.ofHours(1));
    assertThat(redis.del(config.queueKeys(name).get(2))).as("expiry key deleted").isOne();

    Either<NotAcquired, HeldLock> acquired = next.acquire(name, TTL, Duration.ofSeconds(30));

    assertThat(acquired.isRight()).as("served although the dead place never expires").isTrue();
  }

  /**
   * Closing a backend gives up the places of the acquires still waiting on it, so that waiters
   * elsewhere need not wait for them to expire, and refuses their later calls before anything is
   * sent (a waiter woken meanwhile must not take a place again).
   */
  @Test
  void closingABackendGivesUpThePlacesOfItsWaiters() {
    RedisLockBackend waiterBackend = newBackend();
    FencedLock holder = lock(newBackend(), LeaseClock.system(), LockConfig.DEFAULT_PATIENCE);
    TimersNeverFire timers = new TimersNeverFire();
    FencedLock waiter = lock(waiterBackend, timers, LockConfig.DEFAULT_PATIENCE);
    HeldLock held = holder.tryAcquire(name, TTL).get();
    threads.submit(() -> waiter.acquire(name, TTL, LONG_WAIT));
    await().atMost(Duration.ofSeconds(10)).until(() -> timers.waits() >= 2);
    assertThat(places()).as("the waiter's place").isOne();

    waiterBackend.close();

    assertThat(places()).as("places left after close").isZero();
    assertThatThrownBy(
            () -> waiterBackend.tryAcquireInTurn(name, "late#0", TTL, "late", TTL, Duration.ZERO))
        .as("a wait's call after close")
        .isInstanceOf(IllegalStateException.class);
    assertThat(places()).as("places after a late call").isZero();
    held.release();
  }

  /**
   * A user whose ACL does not allow the release channel (Redis 7's default for new users, {@code
   * acl-pubsub-default resetchannels}): the release's {@code PUBLISH} is refused, and the release
   * still frees the lease and answers true (the wake-up runs under {@code pcall}); a waiting
   * acquire finds that nothing wakes it, polls, and gets the lock. Control: the same {@code
   * PUBLISH} sent by that user is refused.
   */
  @Test
  void withoutTheChannelInTheAclReleasesAnswerTrueAndWaitersPoll() throws Exception {
    RedisClient restricted = clientOf(aclUser(false));
    RedisLockBackend backend = RedisLockBackend.connect(restricted, config);
    closing.add(backend);
    FencingToken held = backend.tryAcquire(name, "h#0", TTL).get();
    assertThat(backend.tryAcquireInTurn(name, "w#0", TTL, "w", TTL, Duration.ZERO)).isEmpty();

    assertThat(backend.release(name, "h#0", held)).as("released, its wake-up refused").isTrue();
    assertThat(freeNow()).isTrue();
    try (StatefulRedisConnection<String, String> asUser = restricted.connect()) {
      assertThatThrownBy(() -> asUser.sync().publish(config.releaseChannel(), "w"))
          .as("PUBLISH by that user")
          .hasMessageContaining("NOPERM");
    }
    backend.leaveQueue(name, "w");

    FencedLock holder = lock(backend, LeaseClock.system(), LockConfig.DEFAULT_PATIENCE);
    FencedLock waiter = lock(backend, LeaseClock.system(), LockConfig.DEFAULT_PATIENCE);
    HeldLock again = holder.tryAcquire(name, TTL).get();
    Future<Either<NotAcquired, HeldLock>> waiting =
        threads.submit(() -> waiter.acquire(name, TTL, Duration.ofSeconds(60)));
    await().atMost(Duration.ofSeconds(20)).until(() -> !backend.wakesWaiters());
    assertThat(again.release()).isEqualTo(new ReleaseOutcome.Released());
    await().atMost(Duration.ofSeconds(30)).until(waiting::isDone);
    assertThat(waiting.get().isRight()).as("the polling waiter got the lock").isTrue();
  }

  /**
   * A user allowed the channel but not {@code PUBLISH}: the subscription is confirmed but hears
   * nothing, which its probe shows within seconds; waiting acquires then poll rather than wait for
   * a wake-up that cannot come. Control: for a user that may publish, the same subscription stays
   * trusted.
   */
  @Test
  void aSubscriptionThatHearsNothingIsNotTrusted() {
    RedisLockBackend deaf =
        RedisLockBackend.connect(clientOf(aclUser(true, CommandType.PUBLISH)), config);
    closing.add(deaf);
    RedisLockBackend heard = RedisLockBackend.connect(clientOf(aclUser(true)), config);
    closing.add(heard);
    deaf.onRelease(name, "w-deaf", () -> {});
    heard.onRelease(name, "w-heard", () -> {});

    await().atMost(Duration.ofSeconds(15)).until(() -> !deaf.wakesWaiters());
    await().during(Duration.ofSeconds(7)).atMost(Duration.ofSeconds(10)).until(heard::wakesWaiters);
  }

  /**
   * A user whose ACL lacks the queue's commands (written for the scripts of 0.1): the in-turn
   * acquire falls back to the plain one, answers truthfully, and waiting polls. Control: the
   * queue's script sent by that user is refused.
   */
  @Test
  void withoutTheQueuesCommandsInTheAclTheInTurnAcquireFallsBackToThePlainOne() {
    RedisClient restricted = clientOf(aclUser(true, CommandType.ZADD, CommandType.ZRANGEBYSCORE));
    RedisLockBackend backend = RedisLockBackend.connect(restricted, config);
    closing.add(backend);

    Option<FencingToken> token =
        backend.tryAcquireInTurn(name, "a#0", TTL, "a", TTL, Duration.ZERO);

    assertThat(token).as("granted by the plain acquire").isNotEmpty();
    assertThat(backend.holder(name)).contains(new LeaseHolder("a#0", token.get()));
    assertThat(backend.wakesWaiters()).as("waiting goes without the queue").isFalse();
    try (StatefulRedisConnection<String, String> asUser = restricted.connect()) {
      assertThatThrownBy(
              () ->
                  asUser
                      .sync()
                      .eval(
                          RedisScripts.ACQUIRE_IN_TURN.source(),
                          ScriptOutputType.VALUE,
                          keysOfTheInTurnScript(),
                          "b#0",
                          "1000",
                          "b",
                          "1000",
                          "0"))
          .as("the queue's script sent by that user (Redis 7.0's wording, or 7.2's)")
          .hasMessageMatching("(?s).*(can't run this command|no permissions to run).*");
    }
  }

  private String[] keysOfTheInTurnScript() {
    List<String> queue = config.queueKeys(name);
    return new String[] {
      config.leaseKey(name), config.counterKey(name), queue.get(0), queue.get(1), queue.get(2)
    };
  }

  /**
   * A user of the shared server for this test, with every key and every command but {@code denied},
   * and the release channel only if {@code channel}.
   */
  private String aclUser(boolean channel, CommandType... denied) {
    String user = "nolock-test-" + UUID.randomUUID();
    AclSetuserArgs rules = new AclSetuserArgs().reset().on().nopass().allKeys().resetChannels();
    if (channel) {
      rules.channelPattern(config.releaseChannel());
    }
    rules.allCommands();
    for (CommandType command : denied) {
      rules.removeCommand(command);
    }
    redis.aclSetuser(user, rules);
    closing.add(() -> redis.aclDeluser(user));
    return user;
  }

  private RedisClient clientOf(String user) {
    RedisClient userClient =
        RedisClient.create(RedisURI.builder(uri).withAuthentication(user, "unused").build());
    closing.add(() -> userClient.shutdown(Duration.ZERO, Duration.ofSeconds(1)));
    return userClient;
  }

  /**
   * The holder takes the lock; w1, w2 and w3 begin to wait in that order, each in the queue (or,
   * without one, refused once) before the next starts; the holder releases and asks again at once.
   * Each records its name when served, then releases.
   */
  private List<String> servedOrder(Supplier<LockBackend> backends, Duration patience)
      throws Exception {
    List<String> served = new CopyOnWriteArrayList<>();
    FencedLock holder = lock(backends.get(), new TimersNeverFire(), patience);
    HeldLock first = holder.tryAcquire(name, TTL).get();
    for (String waiter : List.of("w1", "w2", "w3")) {
      FencedLock lock = lock(backends.get(), new TimersNeverFire(), patience);
      int before = attemptsSoFar();
      threads.submit(() -> serve(lock, waiter, served));
      await().atMost(Duration.ofSeconds(10)).until(() -> attemptsSoFar() > before);
    }
    first.release();
    threads.submit(() -> serve(holder, "holder", served));
    return served;
  }

  private Void serve(FencedLock lock, String who, List<String> served) {
    lock.acquire(name, TTL, LONG_WAIT)
        .peek(
            held -> {
              served.add(who);
              held.release();
            });
    return null;
  }

  /** Refused attempts so far: places in the queue, or with no queue, this test's lost races. */
  private final List<Object> refusals = new CopyOnWriteArrayList<>();

  private int attemptsSoFar() {
    return places() + refusals.size();
  }

  /** A holder takes the lock, a waiter on a clock whose timers never fire waits, it is released. */
  private Future<Either<NotAcquired, HeldLock>> waitOnTimersThatNeverFire(
      RedisLockBackend backend) {
    FencedLock holder = lock(backend, LeaseClock.system(), LockConfig.DEFAULT_PATIENCE);
    TimersNeverFire timers = new TimersNeverFire();
    FencedLock waiter = lock(backend, timers, LockConfig.DEFAULT_PATIENCE);
    HeldLock held = holder.tryAcquire(name, TTL).get();
    Future<Either<NotAcquired, HeldLock>> waiting =
        threads.submit(() -> waiter.acquire(name, TTL, LONG_WAIT));
    // Refused once and waiting: for a wake-up (in the queue) or for a timer (polling).
    await().atMost(Duration.ofSeconds(10)).until(() -> timers.waits() > 0);
    boolean queues = backend.wakesWaiters();
    assertThat(places()).as("places in the queue").isEqualTo(queues ? 1 : 0);
    if (queues) {
      // The subscription wakes every waiter once when it is confirmed; let that wake-up be
      // answered first, so that only the release's message can wake the waiter below.
      await().atMost(Duration.ofSeconds(10)).until(() -> timers.waits() >= 2);
    }
    held.release();
    return waiting;
  }

  /**
   * A waiter queues behind a holder with a place of {@code place}, never asks again, and the holder
   * releases: the lease is free, the dead waiter's place is ahead of everyone.
   */
  private void deadWaiterAheadOfAFreeLock(Duration place) {
    RedisLockBackend backend = newBackend();
    FencingToken held = backend.tryAcquire(name, "h#0", TTL).get();
    assertThat(backend.tryAcquireInTurn(name, "dead#0", TTL, "dead-waiter", place, Duration.ZERO))
        .as("the lease is held")
        .isEmpty();
    assertThat(backend.release(name, "h#0", held)).isTrue();
    assertThat(freeNow()).isTrue();
    assertThat(places()).as("the dead waiter's place").isOne();
  }

  private RedisLockBackend newBackend() {
    RedisLockBackend backend = RedisLockBackend.connect(client, config);
    closing.add(backend);
    return backend;
  }

  private FencedLock lock(LockBackend backend, LeaseClock clock, Duration patience) {
    FencedLock lock =
        FencedLock.create(
            backend,
            LockConfig.custom(LockPurpose.CORRECTNESS)
                .owner("p-" + UUID.randomUUID())
                .clock(clock)
                .patience(patience)
                .build());
    closing.add(lock);
    return lock;
  }

  /** {@code real} as a plain {@link LockBackend}, counting the races it lost. */
  private LockBackend plain(LockBackend real) {
    return new ForwardingLockBackend(real) {
      @Override
      public Option<FencingToken> tryAcquire(String n, String owner, Duration ttl) {
        Option<FencingToken> token = super.tryAcquire(n, owner, ttl);
        if (token.isEmpty()) {
          refusals.add(owner);
        }
        return token;
      }
    };
  }

  private boolean freeNow() {
    return redis.exists(config.leaseKey(name)) == 0;
  }

  /** Places in the queue of this test's lock, unexpired or not yet dropped. */
  private int places() {
    return Math.toIntExact(redis.zcard(config.queueKeys(name).get(0)));
  }

  /** The ids of this test client's connections that are subscribed to a channel. */
  private List<String> subscriptionIds() {
    String own = "name=" + redis.clientGetname();
    List<String> ids = new ArrayList<>();
    for (String line : redis.clientList().split("\n")) {
      List<String> fields = Arrays.asList(line.trim().split(" "));
      if (fields.contains(own) && !fields.contains("sub=0")) {
        fields.stream()
            .filter(f -> f.startsWith("id="))
            .forEach(f -> ids.add(f.substring("id=".length())));
      }
    }
    return ids;
  }

  private long killSubscription() {
    List<String> ids = subscriptionIds();
    long killed = 0;
    for (String id : ids) {
      killed += redis.clientKill(KillArgs.Builder.id(Long.parseLong(id)));
    }
    return killed;
  }
}
