package dev.nolock.benchmarks;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.redis.RedisFence;
import dev.nolock.lock.redis.RedisFenceConfig;
import dev.nolock.lock.redis.RedisLockBackend;
import dev.nolock.lock.redis.RedisLockBackendConfig;
import dev.nolock.lock.redis.RedisScripts;
import dev.nolock.patterns.GrantOwner;
import io.lettuce.core.KeyScanCursor;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScanArgs;
import io.lettuce.core.ScanCursor;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.BenchmarkParams;
import org.redisson.Redisson;
import org.redisson.api.RFencedLock;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Increment a counter for a key under a Redis lock: try the lock once (never wait), read the
 * counter, write {@code value + 1}, release. One attempt per invocation; a lock held by another
 * thread is a conflict, not retried. The lock name and the counter key come from {@link
 * Bench#pick}, under a key prefix unique to the trial.
 *
 * <ul>
 *   <li>{@code lockRedisFenced}: nolock's design, a {@link FencedLock} ({@link
 *       LockPurpose#CORRECTNESS}, default settings, so its watchdog schedules a renewal and an
 *       expiry timer for every grant) over {@link RedisLockBackend}:
 *       <ol>
 *         <li>{@code tryAcquire(name, 10 s)}: {@code EVALSHA} acquire ({@code EXISTS}, {@code INCR}
 *             the token counter, {@code SET lease owner|token PX}).
 *         <li>{@code checkPointOfNoReturn} (local), {@code GET} the counter.
 *         <li>{@link RedisFence#write}, two round trips: {@code EVALSHA} of the horizon read (the
 *             fence's write sequence number and establishment id, read before the write is first
 *             sent so that a resend after a lost answer can tell whether it was applied), then
 *             {@code EVALSHA} of the fenced write ({@code INFO server} and {@code INFO replication}
 *             for the server's identity, {@code HGET}s of the fence's state and the lock's entry,
 *             refuse a stale token, else {@code HSET} the entry and the write id, {@code SET} the
 *             counter).
 *         <li>Close the {@link HeldLock}: {@code EVALSHA} compare-and-delete release, which also
 *             {@code SET}s the grant's release marker ({@code PX} the 2 s command timeout) so that
 *             a resend after a lost answer answers true: one short-lived key per release.
 *       </ol>
 *   <li>{@code lockRedisRaw}: the floor, the same five round trips with the same Lua scripts and
 *       arguments (the library's own source text, loaded once with {@code SCRIPT LOAD}; an owner
 *       per grant, a call id per release) through plain Lettuce {@code EVALSHA} and {@code GET}: no
 *       facade, no watchdog, no deadline, no validation.
 *   <li>{@code lockRedissonRLock}: the peer, Redisson's {@code RLock.tryLock(0, SECONDS)}, the same
 *       unfenced {@code GET} + {@code SET} of the counter (an {@code RLock} has no token to fence
 *       with), {@code unlock()}.
 *   <li>{@code lockRedissonFencedLock}: the peer with a token, Redisson's {@code
 *       RFencedLock.tryLockAndGetToken(0, SECONDS)}, the same {@code GET} + {@code SET}, {@code
 *       unlock()}. Redisson offers no server-side check of its token for a Redis key, so the write
 *       is unfenced here too.
 * </ul>
 *
 * What the comparison measures: every variant sends five commands per acquired lock, counted in
 * Redis's {@code MONITOR} (one per refused attempt). Redisson's are the acquire script, {@code
 * GET}, {@code SET}, the release script and a {@code DEL} of the unlock latch key that its release
 * leaves; nolock's are the acquire, {@code GET}, the fence's two (the horizon read, then the write,
 * so that the write's outcome stays decidable after a lost answer) and the release. Every counter
 * read and write goes through the same shared Lettuce connection, which is what nolock's README
 * recommends (one multiplexed, thread-safe connection for all threads); only the lock differs.
 * Redisson's lock commands go through its own pool, sized to the thread count, as Redisson is meant
 * to be used. Both libraries run the same renewal policy, a 10 s lease renewed every third of it:
 * nolock's default ({@code autoRenew}, as its README uses it) and Redisson's watchdog (no lease
 * time passed, {@code lockWatchdogTimeout} 10 s). Every grant schedules a renewal (nolock also an
 * expiry timer) that never fires in a critical section this short, and every release cancels it;
 * that cost is part of each design and shows in its ratios.
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
public class RedisLockBenchmark {

  private static final Duration TTL = Duration.ofSeconds(10);
  private static final String TTL_MILLIS = Long.toString(TTL.toMillis());

  private static final Duration EXPECTED_WRITE = Duration.ofMillis(50);

  /** 1 is the hot key; 10000 spreads the locks. */
  @Param({"1", "10000"})
  public int keys;

  private String prefix;
  private RedisClient client;
  private StatefulRedisConnection<String, String> connection;
  private RedisCommands<String, String> redis;

  private RedisLockBackendConfig backendConfig;
  private RedisFenceConfig fenceConfig;
  private FencedLock locks;
  private RedisFence fence;

  private String owner;
  private String rememberedWrites;
  private String acquireSha;
  private String fenceHorizonSha;
  private String fencedWriteSha;
  private String releaseSha;
  private String releaseChannel;
  private String releaseMarkerMillis;

  private RedissonClient redisson;

  // A worker of a paired run keeps its clients for its life: a new Netty client per turn would
  // cost more than the turn measures. The key prefix stays new per turn.
  private static RedisClient workerClient;
  private static StatefulRedisConnection<String, String> workerConnection;
  private static final Map<Integer, RedissonClient> workerRedisson = new ConcurrentHashMap<>();

  @Setup(Level.Trial)
  public void setUp(BenchmarkParams params) {
    prefix = Bench.unique("bench") + ":";
    RedisURI uri = RedisURI.create(Bench.redisUri());
    // nolock's README: a command timeout well below the lease TTL (Lettuce's default is 60 s).
    uri.setTimeout(Duration.ofSeconds(2));
    if (TurnWorker.active() && workerConnection != null) {
      client = workerClient;
      connection = workerConnection;
    } else {
      client = RedisClient.create(uri);
      connection = client.connect();
      if (TurnWorker.active()) {
        workerClient = client;
        workerConnection = connection;
      }
    }
    redis = connection.sync();

    backendConfig = RedisLockBackendConfig.custom().keyPrefix(prefix + "lock:").build();
    fenceConfig =
        RedisFenceConfig.custom()
            .keyPrefix(prefix + "fence:")
            .lockKeyPrefix(backendConfig.keyPrefix())
            .build();
    LockConfig lockConfig = LockConfig.custom(LockPurpose.CORRECTNESS).build();
    locks = FencedLock.create(RedisLockBackend.create(connection, backendConfig), lockConfig);
    fence = RedisFence.create(connection, fenceConfig);
    // The operator's one-time step; the trial's prefix is new, so nothing was ever issued.
    fence.establish(0);

    // The floor sends the same process owner, with a nonce per grant as the facade does (same
    // length in every lease value), and byte-identical scripts: taking the library's source text
    // rather than a copy keeps them from drifting.
    owner = lockConfig.owner();
    rememberedWrites = Integer.toString(fenceConfig.rememberedWrites());
    releaseMarkerMillis = Long.toString(uri.getTimeout().toMillis());
    releaseChannel = backendConfig.releaseChannel();
    acquireSha = redis.scriptLoad(RedisScripts.ACQUIRE.source());
    fenceHorizonSha = redis.scriptLoad(RedisScripts.FENCE_HORIZON.source());
    fencedWriteSha = redis.scriptLoad(RedisScripts.FENCED_WRITE.source());
    releaseSha = redis.scriptLoad(RedisScripts.RELEASE.source());

    // Only Redisson's own trials start it: an idle client's threads and connections would be
    // noise beside the other variants on a two-core machine.
    if (params.getBenchmark().contains("Redisson")) {
      int threads = params.getThreads();
      if (TurnWorker.active() && workerRedisson.containsKey(threads)) {
        redisson = workerRedisson.get(threads);
        return;
      }
      // The same renewal policy as nolock's default: a 10 s lease renewed every third of it.
      Config config = new Config().setLockWatchdogTimeout(TTL.toMillis());
      config
          .useSingleServer()
          .setAddress(Bench.redisUri())
          .setTimeout(2000)
          .setConnectionPoolSize(threads)
          .setConnectionMinimumIdleSize(threads)
          // tryLock with a zero wait never subscribes to the unlock channel.
          .setSubscriptionConnectionPoolSize(1)
          .setSubscriptionConnectionMinimumIdleSize(1);
      redisson = Redisson.create(config);
      if (TurnWorker.active()) {
        workerRedisson.put(threads, redisson);
      }
    }
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    TurnWorker.afterTrial(this::close);
  }

  private void close() {
    locks.close();
    if (redisson != null && !TurnWorker.active()) {
      redisson.shutdown();
    }
    // Redisson puts its token and unlock-latch keys in front of the lock name, so match anywhere.
    ScanArgs ours = ScanArgs.Builder.matches("*" + prefix + "*").limit(1000);
    KeyScanCursor<String> cursor = redis.scan(ours);
    while (true) {
      List<String> found = cursor.getKeys();
      if (!found.isEmpty()) {
        redis.unlink(found.toArray(String[]::new));
      }
      if (cursor.isFinished()) {
        break;
      }
      cursor = redis.scan(ScanCursor.of(cursor.getCursor()), ours);
    }
    if (!TurnWorker.active()) {
      connection.close();
      client.shutdown();
    }
  }

  @Benchmark
  public void lockRedisFenced(Outcomes outcomes) {
    String name = Integer.toString(Bench.pick(keys));
    Option<HeldLock> held = locks.tryAcquire(name, TTL);
    if (held.isEmpty()) {
      outcomes.of(false);
      return;
    }
    try (HeldLock lock = held.get()) {
      lock.checkPointOfNoReturn(EXPECTED_WRITE);
      String key = counterKey(name);
      String value = redis.get(key);
      long next = value == null ? 1 : Long.parseLong(value) + 1;
      outcomes.of(fence.write(lock.lease(), key, Long.toString(next)).isRight());
    }
  }

  @Benchmark
  public void lockRedisRaw(Outcomes outcomes) {
    String name = Integer.toString(Bench.pick(keys));
    String tag = "{" + name + "}";
    String leaseKey = prefix + "lock:" + tag;
    // One owner per grant, as the facade sends: the acquire script gives a grant that asks again
    // its own token, so threads sharing one owner would all "hold" the hot key at once.
    String grant = GrantOwner.newGrant(owner);
    String token =
        redis.evalsha(
            acquireSha,
            ScriptOutputType.VALUE,
            new String[] {leaseKey, leaseKey + ":token"},
            grant,
            TTL_MILLIS);
    if (token == null) {
      outcomes.of(false);
      return;
    }
    try {
      String key = counterKey(name);
      String value = redis.get(key);
      long next = value == null ? 1 : Long.parseLong(value) + 1;
      List<Object> horizon =
          redis.evalsha(
              fenceHorizonSha, ScriptOutputType.MULTI, new String[] {fenceConfig.stateKey()});
      List<Object> reply =
          redis.evalsha(
              fencedWriteSha,
              ScriptOutputType.MULTI,
              new String[] {fenceConfig.stateKey(), key},
              token,
              grant,
              name,
              UUID.randomUUID().toString(),
              (String) horizon.get(0),
              (String) horizon.get(1),
              rememberedWrites,
              Long.toString(next));
      outcomes.of(Long.valueOf(1L).equals(reply.get(0)));
    } finally {
      // The release looks for waiters to wake (here there never are: nothing waits in turn).
      List<String> queue = backendConfig.queueKeys(name);
      redis.evalsha(
          releaseSha,
          ScriptOutputType.INTEGER,
          new String[] {
            leaseKey,
            leaseKey + RedisLockBackendConfig.RELEASED_INFIX + token,
            queue.get(0),
            queue.get(1),
            queue.get(2)
          },
          grant + '|' + token,
          UUID.randomUUID().toString(),
          releaseMarkerMillis,
          releaseChannel);
    }
  }

  @Benchmark
  public void lockRedissonRLock(Outcomes outcomes) throws InterruptedException {
    String name = Integer.toString(Bench.pick(keys));
    RLock lock = redisson.getLock(prefix + "rlock:" + name);
    // No lease time: Redisson's watchdog renews the grant, as nolock's auto-renewal does.
    if (!lock.tryLock(0, TimeUnit.SECONDS)) {
      outcomes.of(false);
      return;
    }
    try {
      incrementUnfenced(name);
      outcomes.of(true);
    } finally {
      lock.unlock();
    }
  }

  @Benchmark
  public void lockRedissonFencedLock(Outcomes outcomes) {
    String name = Integer.toString(Bench.pick(keys));
    RFencedLock lock = redisson.getFencedLock(prefix + "rfenced:" + name);
    // No lease time: Redisson's watchdog renews the grant, as nolock's auto-renewal does.
    Long token = lock.tryLockAndGetToken(0, TimeUnit.SECONDS);
    if (token == null) {
      outcomes.of(false);
      return;
    }
    try {
      incrementUnfenced(name);
      outcomes.of(true);
    } finally {
      lock.unlock();
    }
  }

  /** The counter of lock {@code name}: outside the fence prefix, in the lock's hash-tag slot. */
  private String counterKey(String name) {
    return prefix + "counter:{" + name + "}";
  }

  private void incrementUnfenced(String name) {
    String key = counterKey(name);
    String value = redis.get(key);
    redis.set(key, Long.toString(value == null ? 1 : Long.parseLong(value) + 1));
  }
}
