package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.lock.redis.internal.Scripts;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.LockBackendContract;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import io.lettuce.core.RedisClient;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.async.RedisAsyncCommands;
import io.lettuce.core.api.sync.RedisCommands;
import io.vavr.control.Option;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The whole {@link LockBackendContract} against the real Redis, with a peek that reads the lease
 * key natively ({@code GET} and {@code PTTL}), plus what is particular to Redis: the keys, the
 * counter that outlives releases, raising the counter ({@code ensureTokensAbove}) and the errors.
 */
@ExtendWith(RedisExtension.class)
class RedisLockBackendIT extends LockBackendContract {

  private static final Duration TTL = Duration.ofSeconds(10);

  private static StatefulRedisConnection<String, String> connection;
  private static RedisCommands<String, String> redis;
  private static RedisLockBackend backend;

  @BeforeAll
  static void connect(RedisClient client, RedisKeys keys) {
    connection = client.connect();
    redis = connection.sync();
    backend =
        RedisLockBackend.create(
            connection, RedisLockBackendConfig.custom().keyPrefix(keys.key("lock:")).build());
  }

  @AfterAll
  static void disconnect() {
    backend.close();
    connection.close();
  }

  @Override
  protected LockBackend backend() {
    return backend;
  }

  @Override
  protected Option<ObservedLease> peek(String name) {
    return peek(redis, backend.config().leaseKey(name));
  }

  /**
   * The lease stored at {@code leaseKey} ({@code owner|token}), expiry judged by Redis's clock:
   * {@code waitLeft} is the key's PTTL. Redis keeps no change marker and no duration, only the
   * key's time to live.
   */
  static Option<ObservedLease> peek(RedisCommands<String, String> redis, String leaseKey) {
    String value = redis.get(leaseKey);
    if (value == null) {
      return Option.none();
    }
    long pttl = redis.pttl(leaseKey);
    if (pttl == -1) {
      throw new AssertionError("the lease key " + leaseKey + " has no TTL: it never frees itself");
    }
    int bar = value.lastIndexOf('|');
    // -2: the key expired (or was deleted) between the GET and the PTTL. PTTL truncates to whole
    // milliseconds and the key lives through the millisecond of its expiry, so a PTTL of 0 is
    // still held: round up.
    Duration waitLeft = pttl == -2 ? Duration.ZERO : Duration.ofMillis(pttl + 1);
    return Option.some(
        new ObservedLease(
            Option.some(
                new LeaseHolder(
                    value.substring(0, bar),
                    FencingToken.of(Long.parseLong(value.substring(bar + 1))))),
            Option.none(),
            Option.none(),
            waitLeft));
  }

  /** The holder of the unexpired lease of {@code name} that {@link #peek} shows, if any. */
  private Optional<LeaseHolder> liveHolder(String name) {
    return peek(name).flatMap(ObservedLease::liveHolder).toJavaOptional();
  }

  @Test
  void theLeaseIsStoredAsOwnerBarTokenWithTheTtlAndTheCounterHasNoTtl() {
    String name = name("schema");
    FencingToken token = backend.tryAcquire(name, "worker|7", TTL).get();

    String leaseKey = backend.config().leaseKey(name);
    assertThat(redis.get(leaseKey)).isEqualTo("worker|7|" + token.value());
    assertThat(redis.pttl(leaseKey)).isBetween(1L, TTL.toMillis());
    assertThat(redis.get(backend.config().counterKey(name))).isEqualTo(token.value() + "");
    assertThat(redis.pttl(backend.config().counterKey(name))).as("no TTL").isEqualTo(-1L);
  }

  @Test
  void theLeaseAndCounterKeysShareOneHashTagEvenForNamesWithBraces() {
    String name = name("a}b{c%");
    FencingToken token = backend.tryAcquire(name, "A", TTL).get();

    String leaseKey = backend.config().leaseKey(name);
    String counterKey = backend.config().counterKey(name);
    assertThat(leaseKey).endsWith("-a%7Db%7Bc%25}");
    assertThat(hashTagOf(leaseKey))
        .isEqualTo(hashTagOf(counterKey))
        .isEqualTo(leaseKey.substring(leaseKey.indexOf('{') + 1, leaseKey.length() - 1));
    assertThat(liveHolder(name)).contains(new LeaseHolder("A", token));
  }

  /** What Redis Cluster hashes: the text between the first '{' and the first '}' after it. */
  private static String hashTagOf(String key) {
    int open = key.indexOf('{');
    int close = key.indexOf('}', open + 1);
    assertThat(open).as("a hash tag in " + key).isNotNegative();
    assertThat(close).as("a hash tag in " + key).isGreaterThan(open + 1);
    return key.substring(open + 1, close);
  }

  @Test
  void releaseLeavesTheCounterSoTheNextGrantIsHigher() {
    String name = name("counter-survives");
    FencingToken first = backend.tryAcquire(name, "A", TTL).get();
    backend.release(name, "A", first);

    assertThat(redis.exists(backend.config().leaseKey(name))).isZero();
    assertThat(redis.get(backend.config().counterKey(name))).isEqualTo(first.value() + "");
    assertThat(backend.tryAcquire(name, "B", TTL).get().isNewerThan(first)).isTrue();
  }

  @Test
  void renewalResetsTheTtlOfTheHoldersOwnLease() {
    String name = name("renew-ttl");
    FencingToken token = backend.tryAcquire(name, "A", Duration.ofSeconds(2)).get();

    assertThat(backend.renew(name, "A", token, Duration.ofSeconds(60))).isTrue();

    assertThat(redis.pttl(backend.config().leaseKey(name))).isGreaterThan(2_000L);
  }

  @Test
  void anAcquireByTheGrantThatHoldsTheLeaseReturnsItsOwnTokenAndGrantsNothingNew() {
    String name = name("same-grant");
    String leaseKey = backend.config().leaseKey(name);
    FencingToken token = backend.tryAcquire(name, "w|7#1", Duration.ofSeconds(2)).get();

    assertThat(backend.tryAcquire(name, "w|7#1", TTL).toJavaOptional())
        .as("the holding grant asking again (a resend, or its retry after unknown)")
        .contains(token);
    assertThat(redis.get(backend.config().counterKey(name)))
        .as("no new token")
        .isEqualTo(token.value() + "");
    assertThat(redis.get(leaseKey)).isEqualTo("w|7#1|" + token.value());
    assertThat(redis.pttl(leaseKey))
        .as("the caller counts the TTL from its last call: the lease lasts that long")
        .isGreaterThan(2_000L);
    assertThat(backend.tryAcquire(name, "w|7#1", Duration.ofMillis(500)).toJavaOptional())
        .contains(token);
    assertThat(redis.pttl(leaseKey)).as("never shortened").isGreaterThan(2_000L);

    // Negative controls: another grant of the same process, and owners that share a prefix.
    assertThat(backend.tryAcquire(name, "w|7#2", TTL).toJavaOptional()).isEmpty();
    assertThat(backend.tryAcquire(name, "w", TTL).toJavaOptional()).isEmpty();
    assertThat(backend.tryAcquire(name, "w|7", TTL).toJavaOptional()).isEmpty();
    assertThat(backend.tryAcquire(name, "w|7#1|" + token.value(), TTL).toJavaOptional()).isEmpty();
    assertThat(redis.get(leaseKey)).isEqualTo("w|7#1|" + token.value());
  }

  @Test
  void aReleaseLeavesAMarkerOfItsCallForTheCommandTimeout() {
    String name = name("release-marker");
    FencingToken token = backend.tryAcquire(name, "A", TTL).get();
    String markerKey = backend.config().releaseMarkerKey(name, token);

    assertThat(backend.release(name, "A", token)).isTrue();

    assertThat(markerKey).isEqualTo(backend.config().leaseKey(name) + ":released:" + token.value());
    assertThat(redis.get(markerKey))
        .as("the id of the release call that freed the lease")
        .matches("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}");
    assertThat(redis.pttl(markerKey))
        .as("kept at most the command timeout: as long as the caller can hear a resend's answer")
        .isBetween(1L, connection.getTimeout().toMillis());
    assertThat(backend.release(name, "A", token))
        .as("a second release call, with an id of its own")
        .isFalse();

    FencingToken next = backend.tryAcquire(name, "B", TTL).get();
    assertThat(backend.release(name, "A", next)).as("another owner's release").isFalse();
    assertThat(redis.exists(backend.config().releaseMarkerKey(name, next)))
        .as("a release that freed nothing leaves no marker")
        .isZero();
  }

  @Test
  void aResendOfTheReleaseCallThatFreedTheLeaseAnswersTrueAndNoOtherCallDoes() {
    String name = name("release-resend");
    FencingToken token = backend.tryAcquire(name, "A", TTL).get();
    List<String> queue = backend.config().queueKeys(name);
    String[] keys = {
      backend.config().leaseKey(name),
      backend.config().releaseMarkerKey(name, token),
      queue.get(0),
      queue.get(1),
      queue.get(2)
    };
    String channel = backend.config().releaseChannel();
    redis.scriptLoad(Scripts.RELEASE.source());

    // The script as Lettuce sends it, and resends after a lost answer: the same call id.
    Long first =
        redis.evalsha(
            Scripts.RELEASE.sha(),
            ScriptOutputType.INTEGER,
            keys,
            "A|" + token.value(),
            "call-1",
            "10000",
            channel);
    FencingToken next = backend.tryAcquire(name, "B", TTL).get();
    Long resent =
        redis.evalsha(
            Scripts.RELEASE.sha(),
            ScriptOutputType.INTEGER,
            keys,
            "A|" + token.value(),
            "call-1",
            "10000",
            channel);
    Long another =
        redis.evalsha(
            Scripts.RELEASE.sha(),
            ScriptOutputType.INTEGER,
            keys,
            "A|" + token.value(),
            "call-2",
            "10000",
            channel);

    assertThat(first).as("the first send frees the lease").isEqualTo(1L);
    assertThat(resent).as("its resend, after the next holder took the lease").isEqualTo(1L);
    assertThat(another).as("another call of the same grant (negative control)").isZero();
    assertThat(liveHolder(name))
        .as("the next holder's lease, untouched")
        .contains(new LeaseHolder("B", next));
  }

  @Test
  void aConnectionWithoutACommandTimeoutIsRefused(RedisClient client) {
    try (StatefulRedisConnection<String, String> unbounded = client.connect()) {
      unbounded.setTimeout(Duration.ZERO);

      assertThatThrownBy(() -> RedisLockBackend.create(unbounded))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("RedisURI.setTimeout");
    }
  }

  @Test
  void ensureTokensAboveRaisesTheCounterButNeverLowersIt() {
    String name = name("floor");
    assertThat(backend.ensureTokensAbove(name, 41)).isEqualTo(41);
    FencingToken token = backend.tryAcquire(name, "A", TTL).get();
    assertThat(token).isEqualTo(FencingToken.of(42));

    assertThat(backend.ensureTokensAbove(name, 5))
        .as("a lower floor changes nothing")
        .isEqualTo(42);
    assertThat(backend.ensureTokensAbove(name, 0)).isEqualTo(42);
    assertThat(backend.release(name, "A", token)).isTrue();
    assertThat(backend.tryAcquire(name, "B", TTL).get()).isEqualTo(FencingToken.of(43));
  }

  @Test
  void tokensBeyondTheExactRangeOfLuaNumbersStayExact() {
    String name = name("big");
    long floor = 123_456_789_012_345_678L;
    backend.ensureTokensAbove(name, floor);

    FencingToken token = backend.tryAcquire(name, "A", TTL).get();

    assertThat(token).isEqualTo(FencingToken.of(floor + 1));
    assertThat(backend.renew(name, "A", token, TTL)).isTrue();
    assertThat(backend.release(name, "A", token)).isTrue();
  }

  @Test
  void aKeyOfAnotherTypeUnderThePrefixIsReportedAsMisconfiguration() {
    String name = name("wrongtype");
    redis.hset(backend.config().counterKey(name), "field", "value");

    assertThatThrownBy(() -> backend.tryAcquire(name, "A", TTL))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("key prefix");
  }

  @Test
  void aBadTtlOrOwnerIsRefusedBeforeAnythingIsSent() {
    String name = name("bad-input");

    assertThatThrownBy(() -> backend.tryAcquire(name, "A", Duration.ofNanos(10)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("at least 1 ms");
    assertThatThrownBy(() -> backend.tryAcquire(name, " ", TTL))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(redis.exists(backend.config().counterKey(name))).isZero();
  }

  @Test
  void theTtlIsSentRoundedUpToWholeMilliseconds() {
    List<List<String>> scriptArgs = new ArrayList<>();
    // Cached first: a NOSCRIPT answer would have the call sent again as EVAL, and recorded twice.
    redis.scriptLoad(Scripts.ACQUIRE.source());
    redis.scriptLoad(Scripts.RENEW.source());
    RedisLockBackend recorded =
        RedisLockBackend.create(recordingScriptArgs(connection, scriptArgs), backend.config());
    String name = name("ttl-rounding");

    FencingToken token = recorded.tryAcquire(name, "A", Duration.ofNanos(600_000_001)).get();
    assertThat(recorded.renew(name, "A", token, Duration.ofNanos(700_500_000))).isTrue();
    assertThat(recorded.renew(name, "A", token, Duration.ofMillis(800))).isTrue();

    assertThat(scriptArgs)
        .as(
            "the PX the server is asked for must cover the whole TTL the holder counts:"
                + " 600.000001 ms -> 601, 700.5 ms -> 701, exactly 800 ms -> 800")
        .extracting(args -> args.get(args.size() - 1))
        .containsExactly("601", "701", "800");
  }

  /**
   * A connection that runs every command on {@code real} and records the arguments of each script
   * call ({@code EVALSHA} or {@code EVAL}) as it is sent: what the backend sends, read without a
   * race, where the key's {@code PTTL} has already started counting down.
   */
  @SuppressWarnings("unchecked")
  private static StatefulRedisConnection<String, String> recordingScriptArgs(
      StatefulRedisConnection<String, String> real, List<List<String>> scriptArgs) {
    RedisAsyncCommands<String, String> async =
        (RedisAsyncCommands<String, String>)
            Proxy.newProxyInstance(
                RedisAsyncCommands.class.getClassLoader(),
                new Class<?>[] {RedisAsyncCommands.class},
                (proxy, method, args) -> {
                  if ((method.getName().equals("evalsha") || method.getName().equals("eval"))
                      && args.length == 4
                      && args[3] instanceof String[] values) {
                    scriptArgs.add(Arrays.asList(values));
                  }
                  return invoke(method, real.async(), args);
                });
    return (StatefulRedisConnection<String, String>)
        Proxy.newProxyInstance(
            StatefulRedisConnection.class.getClassLoader(),
            new Class<?>[] {StatefulRedisConnection.class},
            (proxy, method, args) ->
                method.getName().equals("async") ? async : invoke(method, real, args));
  }

  private static Object invoke(java.lang.reflect.Method method, Object target, Object[] args)
      throws Throwable {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }
}
