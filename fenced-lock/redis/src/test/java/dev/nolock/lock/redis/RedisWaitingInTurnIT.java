package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.FairLockBackendContract;
import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.NotAcquired;
import dev.nolock.lock.ReleaseOutcome;
import dev.nolock.lock.TimersNeverFire;
import dev.nolock.patterns.FairLockBackend;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LeaseHolder;
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
import io.lettuce.core.event.command.CommandListener;
import io.lettuce.core.event.command.CommandStartedEvent;
import io.lettuce.core.protocol.CommandType;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Waiting for a held lock on Redis: the {@link FairLockBackendContract} (order, patience, wake-up
 * through the release channel and its control on a backend made on a connection, a dead waiter's
 * place), and what only this backend has: the server's clock stepping back, the subscription
 * killed, lost answers of the in-turn script, a place that lost its expiry, closing a backend with
 * waiters, and ACLs without the channel or the queue's commands.
 */
@ExtendWith(RedisExtension.class)
class RedisWaitingInTurnIT extends FairLockBackendContract {

  private final RedisURI uri;
  private final RedisClient client;
  private final RedisLockBackendConfig config;
  private final StatefulRedisConnection<String, String> direct;
  private final RedisCommands<String, String> redis;

  RedisWaitingInTurnIT(RedisURI uri, RedisKeys keys) {
    this.uri = uri;
    // A client of its own, named, so that a test can find its subscription among the server's.
    this.client =
        RedisClient.create(
            RedisURI.builder(uri).withClientName("nolock-wait-" + UUID.randomUUID()).build());
    this.config = RedisLockBackendConfig.custom().keyPrefix(keys.key("lock:")).build();
    this.direct = client.connect();
    this.redis = direct.sync();
    // closed after everything the contract closes
    closing.add(() -> client.shutdown(Duration.ZERO, Duration.ofSeconds(2)));
    closing.add(direct);
  }

  @Override
  protected FairLockBackend createBackend() {
    return RedisLockBackend.connect(client, config);
  }

  /** A backend made on a connection has no client to subscribe with. */
  @Override
  protected FairLockBackend createBackendThatNeverWakes() {
    return RedisLockBackend.create(direct, config);
  }

  @Override
  protected boolean queueGone(String lockName) {
    return redis.exists(config.queueKeys(lockName).toArray(String[]::new)) == 0;
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
    RedisLockBackend backend = newRedisBackend();
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

  /**
   * The subscription's connection is killed while a waiter waits: Lettuce reconnects and subscribes
   * again, which wakes the waiter once, and the next release still wakes it, whose timers never
   * fire.
   */
  @Test
  void afterTheSubscriptionIsKilledItComesBackAndTheReleaseStillWakes() throws Exception {
    RedisLockBackend backend = newRedisBackend();
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
   * The in-turn script's answer is lost with its connection; Lettuce reconnects and sends it again
   * by itself, as in production. The resend finds the grant of its first run and answers its token:
   * one grant, the counter bumped once, no place left.
   */
  @Test
  void anInTurnGrantWhoseAnswerWasLostIsAnsweredOnceByTheResend() {
    RedisLockBackend backend = newRedisBackend();
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
        assertThat(placesOf(name)).as("places left").isZero();
      } finally {
        proxiedClient.shutdown(Duration.ZERO, Duration.ofSeconds(1));
      }
    }
  }

  /**
   * A refused in-turn attempt whose answer is lost, seen through {@link FencedLock}: Lettuce sends
   * the script again, the resend is refused too and only refreshes the waiter's place (its expiry
   * moves on; nothing else asks, the waiter's timers never fire), so the caller keeps waiting (no
   * failure, no second place) and is served once the holder releases, with one grant of its own.
   * The answer dropped is the in-turn script's: the fault is armed when Lettuce starts that
   * command, after the subscription was confirmed.
   */
  @Test
  void aRefusedInTurnAttemptWhoseAnswerWasLostKeepsOnePlaceAndIsServedAfterTheRelease()
      throws Exception {
    RedisLockBackend backend = newRedisBackend();
    FencingToken held = backend.tryAcquire(name, "h#0", TTL).get();
    redis.scriptLoad(RedisScripts.ACQUIRE_IN_TURN.source()); // no NOSCRIPT may take the fault
    String expiries = config.queueKeys(name).get(2);
    try (TcpProxy proxy = TcpProxy.start(uri.getHost(), uri.getPort())) {
      RedisClient proxiedClient =
          RedisClient.create(RedisURI.builder(uri).withPort(proxy.port()).build());
      AtomicBoolean armed = new AtomicBoolean();
      CompletableFuture<InjectedFault> lost = new CompletableFuture<>();
      List<Double> expiryWhenLost = new CopyOnWriteArrayList<>();
      proxiedClient.addListener(
          new CommandListener() {
            @Override
            public void commandStarted(CommandStartedEvent event) {
              // Before Lettuce writes the command: the fault is armed before its bytes leave.
              if (armed.get()
                  && event.getCommand().getType() == CommandType.EVALSHA
                  && event
                      .getCommand()
                      .getArgs()
                      .toCommandString()
                      .contains(RedisScripts.ACQUIRE_IN_TURN.sha())
                  && armed.compareAndSet(true, false)) {
                lost.complete(
                    proxy.loseNext(
                        FaultKind.ANSWER_LOST,
                        () ->
                            expiryWhenLost.add(
                                redis.zrangeWithScores(expiries, 0, 0).get(0).getScore())));
              }
            }
          });
      CountDownLatch confirmed = new CountDownLatch(1);
      try (RedisLockBackend waiterBackend = RedisLockBackend.connect(proxiedClient, config);
          var subscribed = waiterBackend.onRelease(name, "warm-up", confirmed::countDown)) {
        // A confirmed subscription wakes its waiters once: from then on nothing of it crosses the
        // proxy while the waiter waits.
        assertThat(confirmed.await(10, TimeUnit.SECONDS)).as("subscribed").isTrue();
        TimersNeverFire timers = new TimersNeverFire();
        FencedLock waiter = lock(waiterBackend, timers, Duration.ZERO);
        armed.set(true);

        Future<Either<NotAcquired, HeldLock>> waiting =
            threads.submit(() -> waiter.acquire(name, TTL, LONG_WAIT));

        InjectedFault fault = lost.get(10, TimeUnit.SECONDS);
        await().atMost(Duration.ofSeconds(10)).until(fault::fired);
        fault.assertFired();
        // The resend was refused and refreshed the place; the waiter waits for a wake-up.
        await()
            .atMost(Duration.ofSeconds(10))
            .until(
                () ->
                    placesOf(name) == 1
                        && redis.zrangeWithScores(expiries, 0, 0).get(0).getScore()
                            > expiryWhenLost.get(0)
                        && timers.waits() > 0);
        assertThat(waiting.isDone()).as("still waiting: %s", waiting).isFalse();
        assertThat(backend.release(name, "h#0", held)).isTrue();

        Either<NotAcquired, HeldLock> acquired = waiting.get(30, TimeUnit.SECONDS);
        assertThat(acquired.isRight()).as("served after the release: %s", acquired).isTrue();
        assertThat(acquired.get().token().value())
            .as("one grant after the holder's")
            .isEqualTo(held.value() + 1);
        assertThat(placesOf(name)).as("places left").isZero();
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
    RedisLockBackend waiterBackend = newRedisBackend();
    FencedLock holder = lock(newBackend(), LeaseClock.system(), LockConfig.DEFAULT_PATIENCE);
    TimersNeverFire timers = new TimersNeverFire();
    FencedLock waiter = lock(waiterBackend, timers, LockConfig.DEFAULT_PATIENCE);
    HeldLock held = holder.tryAcquire(name, TTL).get();
    threads.submit(() -> waiter.acquire(name, TTL, LONG_WAIT));
    await().atMost(Duration.ofSeconds(10)).until(() -> timers.waits() >= 2);
    assertThat(placesOf(name)).as("the waiter's place").isOne();

    waiterBackend.close();

    assertThat(placesOf(name)).as("places left after close").isZero();
    assertThatThrownBy(
            () -> waiterBackend.tryAcquireInTurn(name, "late#0", TTL, "late", TTL, Duration.ZERO))
        .as("a wait's call after close")
        .isInstanceOf(IllegalStateException.class);
    assertThat(placesOf(name)).as("places after a late call").isZero();
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

  private RedisLockBackend newRedisBackend() {
    return (RedisLockBackend) newBackend();
  }

  /** Places in the queue of {@code lockName}, unexpired or not yet dropped. */
  @Override
  protected int placesOf(String lockName) {
    return Math.toIntExact(redis.zcard(config.queueKeys(lockName).get(0)));
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
