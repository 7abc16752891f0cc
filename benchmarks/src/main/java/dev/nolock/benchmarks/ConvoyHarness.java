package dev.nolock.benchmarks;

import dev.nolock.cas.ValueCodec;
import dev.nolock.cas.VersionColumnStore;
import dev.nolock.cas.VersionColumnStoreConfig;
import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.postgres.PostgresLockBackend;
import dev.nolock.lock.redis.RedisFence;
import dev.nolock.lock.redis.RedisFenceConfig;
import dev.nolock.lock.redis.RedisLockBackend;
import dev.nolock.lock.redis.RedisLockBackendConfig;
import dev.nolock.patterns.FairLockBackend;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.Versioned;
import dev.nolock.patterns.sql.Fence;
import dev.nolock.queue.Job;
import dev.nolock.queue.JobQueue;
import dev.nolock.queue.NewJob;
import dev.nolock.queue.PayloadCodec;
import dev.nolock.queue.QueueConfig;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.vavr.control.Option;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import org.HdrHistogram.Histogram;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;

/**
 * The convoy scenario: {@link #WORKERS} workers share one resource (a hot key, or one queue) while
 * one more participant stalls for {@link Profile#stall()} in the middle of its unit of work. The
 * workers' latency (each unit from its first attempt to done, retries and waits included) is
 * recorded in HdrHistograms by phase: before (done before the stall began), during (in flight at
 * any time during the stall) and after (started after it ended); throughput counts units by when
 * they completed. For the chart, each 100 ms slice records the age of the oldest unit in flight in
 * it (a unit waiting through the stall shows as a ramp).
 *
 * <p>What "stall in the middle" means per design:
 *
 * <ol>
 *   <li>Locks (fenced lock on PostgreSQL and on Redis, blocking advisory lock): the stalled
 *       participant acquires, then stops inside its critical section. The fenced lock's watchdog
 *       keeps renewing (the process is alive, only the work is slow), so the lock stays held: a
 *       long critical section, a slow downstream call, a lock held across a network wait.
 *   <li>Compare-and-swap: the stalled participant's update is in its turn on the row (as one is
 *       after losing races for {@code takeTurnAfter}) and stops inside its change, the row locked:
 *       the worst place for the others, who wait until PostgreSQL ends the idle turn ({@link
 *       VersionColumnStoreConfig#TURN_IDLE_LIMIT}); then the stalled update races on and writes
 *       once. A stall anywhere else in an update holds nobody up: the row of the store's lock-free
 *       mode ({@code neverTakeTurn()}) stops its writer between its read and its write.
 *   <li>{@code SKIP LOCKED} queue: the stalled participant claims a job and stops before completing
 *       it. Other workers skip its row.
 * </ol>
 *
 * <p>A stall by a frozen process (SIGSTOP) differs for a TTL lock: its renewals stop too, so the
 * others wait for the TTL instead of the stall. The fenced-lock pause tests cover that case; here
 * the stall length is the variable, which is what a convoy is made of.
 */
public final class ConvoyHarness {

  static final int WORKERS = 4;
  static final Duration WARM_UP = Duration.ofSeconds(1);
  private static final long SLICE_NANOS = TimeUnit.MILLISECONDS.toNanos(100);
  private static final long MAX_LATENCY_NANOS = TimeUnit.SECONDS.toNanos(60);

  /** One design's unit of work on the shared resource, and how it stalls. */
  interface Subject extends AutoCloseable {
    /** One unit of work, retried or waited for inside until it is done or the design gives up. */
    Tries work() throws Exception;

    /**
     * One unit that stops for {@code stall} at the point described in the class Javadoc, and tells
     * {@code window} when the stop really began and ended ({@code System.nanoTime()}).
     */
    void stalledWork(Duration stall, Consumer<long[]> window) throws Exception;

    @Override
    void close() throws Exception;
  }

  /**
   * How one unit went: the attempts it sent to the server (lock requests, conditional writes,
   * claims) and whether the design gave up on it. A unit that gave up is recorded with the latency
   * to its give-up, which flatters the design: the report counts give-ups beside the latencies.
   */
  record Tries(int attempts, boolean gaveUp) {
    static Tries done(int attempts) {
      return new Tries(attempts, false);
    }
  }

  /** One recorded unit: when it began ({@code System.nanoTime()}), its latency and its tries. */
  record Unit(long begin, long latency, Tries tries) {}

  /**
   * The figures of one design.
   *
   * @param slices per 100 ms since the start: {ms since the start, age in ns of the oldest unit in
   *     flight in it, units in flight in it, units completed in it}
   */
  public record Result(
      String design,
      boolean lockFree,
      Histogram before,
      Histogram during,
      Histogram after,
      double beforePerSecond,
      double duringPerSecond,
      double afterPerSecond,
      double stallFromSecond,
      double stallToSecond,
      List<long[]> slices,
      Phases attempts,
      Phases giveUps) {

    /** Units completed per second in {@code phase}. */
    public double perSecond(Phase phase) {
      return switch (phase) {
        case BEFORE -> beforePerSecond;
        case DURING -> duringPerSecond;
        case AFTER -> afterPerSecond;
      };
    }

    /** Attempts per unit in each phase. */
    public double attemptsPerUnit(Phase phase) {
      return (double) attempts.of(phase) / Math.max(1, histogram(phase).getTotalCount());
    }

    public Histogram histogram(Phase phase) {
      return switch (phase) {
        case BEFORE -> before;
        case DURING -> during;
        case AFTER -> after;
      };
    }

    /** p99 of the units in flight during the stall over p99 of those done before it. */
    public double p99Ratio() {
      return (double) during.getValueAtPercentile(99)
          / Math.max(1, before.getValueAtPercentile(99));
    }
  }

  /** The three phases a unit is filed under, as in the class Javadoc. */
  public enum Phase {
    BEFORE,
    DURING,
    AFTER
  }

  /** A count per phase. */
  public record Phases(long before, long during, long after) {
    long of(Phase phase) {
      return switch (phase) {
        case BEFORE -> before;
        case DURING -> during;
        case AFTER -> after;
      };
    }
  }

  /** The designs, each with how to build it; a design whose server is down fails alone. */
  public record Design(String name, boolean lockFree, String server, SubjectFactory factory) {}

  interface SubjectFactory {
    Subject create() throws Exception;
  }

  public static List<Design> designs() {
    return List.of(
        new Design("Fenced lock (PostgreSQL)", false, "postgres", PostgresFencedLock::new),
        new Design("Fenced lock (Redis)", false, "redis", RedisFencedLock::new),
        new Design(
            "Advisory lock, blocking (PostgreSQL, raw SQL)",
            false,
            "postgres",
            BlockingAdvisory::new),
        new Design(
            CAS_LONG_RETRIES, true, "postgres", () -> new VersionColumnCas(casLongRetries(), true)),
        new Design(
            CAS_DEFAULT_RETRIES,
            true,
            "postgres",
            () -> new VersionColumnCas(RetryPolicy.ofDefaults(), true)),
        new Design(
            CAS_NEVER_TAKES_TURNS,
            true,
            "postgres",
            () -> new VersionColumnCas(casLongRetries(), false)),
        new Design("SKIP LOCKED queue (PostgreSQL)", true, "postgres", SkipLockedQueue::new));
  }

  /**
   * Runs one design through before, stall and after.
   *
   * <ol>
   *   <li>The workers start, and run unrecorded for {@link #WARM_UP} (JIT, pools, plans).
   *   <li>After the before phase the stalled participant starts its unit; it records when its stall
   *       really began, which on a contended lock is when it finally acquired, and when it ended.
   *   <li>The workers run on for the after phase, then stop. Each unit is filed by its start time
   *       against the stall's real begin and end.
   * </ol>
   */
  public static Result run(Design design, Profile profile, Consumer<String> progress)
      throws Exception {
    try (Subject subject = design.factory().create()) {
      long phase = profile.convoyPhase().toNanos();
      List<Unit> units = Collections.synchronizedList(new ArrayList<>());
      AtomicLong stop = new AtomicLong(Long.MAX_VALUE);
      long[] stallWindow = new long[2];
      CountDownLatch stallDone = new CountDownLatch(1);
      ExecutorService pool = Executors.newFixedThreadPool(WORKERS + 1);
      long t0 = System.nanoTime() + WARM_UP.toNanos();
      List<Future<?>> futures = new ArrayList<>();
      for (int w = 0; w < WORKERS; w++) {
        futures.add(
            pool.submit(
                () -> {
                  long begin;
                  while ((begin = System.nanoTime()) < stop.get()) {
                    Tries tries = subject.work();
                    long done = System.nanoTime();
                    if (begin >= t0) {
                      units.add(new Unit(begin, done - begin, tries));
                    }
                  }
                  return null;
                }));
      }
      futures.add(
          pool.submit(
              () -> {
                try {
                  parkUntil(t0 + phase);
                  subject.stalledWork(
                      profile.stall(),
                      window -> {
                        stallWindow[0] = window[0];
                        stallWindow[1] = window[1];
                      });
                } finally {
                  stallDone.countDown();
                }
                return null;
              }));
      if (!stallDone.await(phase / 1_000_000 + 60_000, TimeUnit.MILLISECONDS)) {
        throw new IllegalStateException("the stalled participant never finished its unit");
      }
      long end = stallWindow[1] + phase;
      stop.set(end);
      pool.shutdown();
      for (Future<?> future : futures) {
        future.get(60, TimeUnit.SECONDS);
      }
      Result result = classify(design, units, t0, stallWindow[0], stallWindow[1], end);
      progress.accept(
          String.format(
              Locale.ROOT,
              "convoy %s: p99 before %.1f ms, during the stall %.1f ms, after %.1f ms",
              design.name(),
              result.before().getValueAtPercentile(99) / 1e6,
              result.during().getValueAtPercentile(99) / 1e6,
              result.after().getValueAtPercentile(99) / 1e6));
      return result;
    }
  }

  static Result classify(
      Design design, List<Unit> units, long t0, long stallBegan, long stallEnded, long end) {
    Histogram[] phases = {new Histogram(3), new Histogram(3), new Histogram(3)};
    long[] counts = new long[3];
    long[] attempts = new long[3];
    long[] giveUps = new long[3];
    int sliceCount = (int) ((end - t0) / SLICE_NANOS) + 1;
    long[] sliceMax = new long[sliceCount];
    long[] sliceUnits = new long[sliceCount];
    long[] sliceDone = new long[sliceCount];
    for (Unit unit : units) {
      long begin = unit.begin();
      long done = begin + unit.latency();
      if (begin >= end) {
        continue;
      }
      // A unit belongs to the stall when it was in flight during it: with a blocking lock the
      // victims started before the stall and wait through it.
      int phase = done <= stallBegan ? 0 : begin < stallEnded ? 1 : 2;
      phases[phase].recordValue(Math.min(unit.latency(), MAX_LATENCY_NANOS));
      attempts[phase] += unit.tries().attempts();
      giveUps[phase] += unit.tries().gaveUp() ? 1 : 0;
      if (done < end) {
        counts[done < stallBegan ? 0 : done < stallEnded ? 1 : 2]++;
        sliceDone[(int) ((done - t0) / SLICE_NANOS)]++;
      }
      // The chart's value for a slice is the age of the oldest unit in flight in it, so a worker
      // queued behind a stalled holder draws a ramp through the stall instead of one late point.
      long last = Math.min(done, end) - 1;
      for (int slice = (int) ((begin - t0) / SLICE_NANOS);
          slice <= (int) ((last - t0) / SLICE_NANOS);
          slice++) {
        long sliceEnd = t0 + (slice + 1) * SLICE_NANOS;
        sliceMax[slice] = Math.max(sliceMax[slice], Math.min(done, sliceEnd) - begin);
        sliceUnits[slice]++;
      }
    }
    List<long[]> slices = new ArrayList<>();
    for (int i = 0; i < sliceCount; i++) {
      slices.add(new long[] {i * 100L, sliceMax[i], sliceUnits[i], sliceDone[i]});
    }
    return new Result(
        design.name(),
        design.lockFree(),
        phases[0],
        phases[1],
        phases[2],
        counts[0] / seconds(stallBegan - t0),
        counts[1] / seconds(stallEnded - stallBegan),
        counts[2] / seconds(end - stallEnded),
        seconds(stallBegan - t0),
        seconds(stallEnded - t0),
        slices,
        new Phases(attempts[0], attempts[1], attempts[2]),
        new Phases(giveUps[0], giveUps[1], giveUps[2]));
  }

  private static double seconds(long nanos) {
    return nanos / 1e9;
  }

  /** Waits for a point on the monotonic clock; the phases are times, not events. */
  private static void parkUntil(long nanoTime) throws InterruptedException {
    long left;
    while ((left = nanoTime - System.nanoTime()) > 0) {
      TimeUnit.NANOSECONDS.sleep(left);
    }
  }

  /** The stall itself: a participant that stops for a set time is the scenario, not a wait. */
  private static void stall(Duration stall, Consumer<long[]> window) throws InterruptedException {
    long began = System.nanoTime();
    TimeUnit.NANOSECONDS.sleep(stall.toNanos());
    window.accept(new long[] {began, System.nanoTime()});
  }

  private static final Duration TTL = Duration.ofSeconds(10);
  static final Duration MAX_WAIT = Duration.ofSeconds(30);

  /**
   * The attempts of the CAS writer that must not give up (a give-up ends a unit early and flatters
   * its latency); a second CAS writer runs the default policy and counts its give-ups.
   */
  static final int CAS_MAX_ATTEMPTS = 1_000;

  static final String CAS_LONG_RETRIES =
      "CAS on a version column (PostgreSQL), up to " + CAS_MAX_ATTEMPTS + " attempts";
  static final String CAS_DEFAULT_RETRIES =
      "CAS on a version column (PostgreSQL), default retries ("
          + RetryPolicy.DEFAULT_MAX_ATTEMPTS
          + " attempts)";

  /**
   * The store's lock-free mode ({@code neverTakeTurn()}), beside the default: the trade its turns
   * make (a lower tail before the stall, a wait for a writer stopped in its turn during it), shown
   * in one run. Not held to the bounded worst case before the stall, which is what the turns buy.
   */
  static final String CAS_NEVER_TAKES_TURNS =
      "CAS on a version column (PostgreSQL), lock-free (neverTakeTurn), up to "
          + CAS_MAX_ATTEMPTS
          + " attempts";

  private static RetryPolicy casLongRetries() {
    return RetryPolicy.custom().maxAttempts(CAS_MAX_ATTEMPTS).maxElapsed(MAX_WAIT).build();
  }

  /** A fenced lock on one hot name; a unit is one fenced counter increment under it. */
  abstract static class FencedLockSubject implements Subject {

    abstract FencedLock lock();

    /** The unit's fenced write. */
    abstract void increment(HeldLock held);

    /** The lock requests this thread's current unit sent, counted by {@link CountingBackend}. */
    private final ThreadLocal<int[]> requests = ThreadLocal.withInitial(() -> new int[1]);

    /** The backend to build the lock on, counting the lock requests of each unit. */
    FairLockBackend counted(FairLockBackend backend) {
      return new CountingBackend(backend, requests);
    }

    @Override
    public Tries work() {
      requests.get()[0] = 0;
      try (HeldLock held = acquire()) {
        increment(held);
      }
      return Tries.done(requests.get()[0]);
    }

    @Override
    public void stalledWork(Duration stall, Consumer<long[]> window) throws InterruptedException {
      try (HeldLock held = acquire()) {
        stall(stall, window);
        increment(held);
      }
    }

    private HeldLock acquire() {
      return lock()
          .acquire("hot", TTL, MAX_WAIT)
          .getOrElseThrow(notAcquired -> new IllegalStateException(notAcquired.toString()));
    }
  }

  /** The fenced lock on PostgreSQL, its unit a fenced counter increment. */
  static final class PostgresFencedLock extends FencedLockSubject {
    // One connection more than the participants: the backend's listener for releases keeps one.
    private final Bench.PgSchema schema = Bench.freshSchema(WORKERS + 2);
    private final PostgresLockBackend backend;
    private final FencedLock lock;
    private final Fence fence = Fence.onTable(Fence.DEFAULT_TABLE);
    private final org.jooq.DSLContext dsl = DSL.using(schema.dataSource(), SQLDialect.POSTGRES);

    PostgresFencedLock() {
      schema.execute("CREATE TABLE counters (id bigint PRIMARY KEY, value bigint NOT NULL)");
      schema.execute("INSERT INTO counters VALUES (0, 0)");
      backend = PostgresLockBackend.create(schema.dataSource());
      backend.createTableIfMissing();
      fence.createTableIfMissing(dsl);
      lock = FencedLock.create(counted(backend), LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
    }

    @Override
    void increment(HeldLock held) {
      fence
          .write(
              dsl,
              held.lease(),
              tx -> tx.execute("UPDATE counters SET value = value + 1 WHERE id = 0"))
          .getOrElseThrow(rejection -> new IllegalStateException(rejection.toString()));
    }

    @Override
    FencedLock lock() {
      return lock;
    }

    @Override
    public void close() {
      lock.close();
      backend.close();
      schema.close();
    }
  }

  /** The fenced lock on Redis, its unit a fenced counter write. */
  static final class RedisFencedLock extends FencedLockSubject {
    private final RedisClient client = RedisClient.create(Bench.redisUri());
    private final StatefulRedisConnection<String, String> connection = client.connect();
    private final String prefix = Bench.unique("convoy") + ":";
    private final RedisLockBackend backend =
        RedisLockBackend.connect(
            client, RedisLockBackendConfig.custom().keyPrefix(prefix + "lock:").build());
    private final FencedLock lock =
        FencedLock.create(counted(backend), LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
    private final RedisFence fence =
        RedisFence.create(
            connection,
            RedisFenceConfig.custom()
                .keyPrefix(prefix + "fence:")
                .lockKeyPrefix(prefix + "lock:")
                .build());

    {
      // The operator's one-time step; the prefix is new, so nothing was ever issued.
      fence.establish(0);
    }

    private final String counter = prefix + "counter";

    @Override
    void increment(HeldLock held) {
      String value = connection.sync().get(counter);
      long next = value == null ? 1 : Long.parseLong(value) + 1;
      fence
          .write(held.lease(), counter, Long.toString(next))
          .getOrElseThrow(rejection -> new IllegalStateException(rejection.toString()));
    }

    @Override
    FencedLock lock() {
      return lock;
    }

    @Override
    public void close() {
      lock.close();
      backend.close();
      List<String> keys = connection.sync().keys(prefix + "*");
      keys.addAll(connection.sync().keys("*" + prefix + "*"));
      if (!keys.isEmpty()) {
        connection.sync().del(keys.toArray(String[]::new));
      }
      connection.close();
      client.shutdown();
    }
  }

  /**
   * The blocking transaction-scoped advisory lock in raw SQL: the classic convoy, as measured in
   * benchmarks/GOALS.md. nolock's {@code PostgresAdvisoryLock} only offers the non-blocking try.
   */
  static final class BlockingAdvisory implements Subject {
    private final Bench.PgSchema schema = Bench.freshSchema(WORKERS + 1);

    BlockingAdvisory() {
      schema.execute("CREATE TABLE counters (id bigint PRIMARY KEY, value bigint NOT NULL)");
      schema.execute("INSERT INTO counters VALUES (0, 0)");
    }

    private void locked(Duration stall, Consumer<long[]> window) throws Exception {
      try (Connection connection = schema.dataSource().getConnection()) {
        connection.setAutoCommit(false);
        try (Statement statement = connection.createStatement()) {
          statement.execute("SELECT pg_advisory_xact_lock(42)");
          if (stall != null) {
            stall(stall, window);
          }
          statement.executeUpdate("UPDATE counters SET value = value + 1 WHERE id = 0");
        }
        connection.commit();
      }
    }

    @Override
    public Tries work() throws Exception {
      locked(null, null);
      return Tries.done(1);
    }

    @Override
    public void stalledWork(Duration stall, Consumer<long[]> window) throws Exception {
      locked(stall, window);
    }

    @Override
    public void close() {
      schema.close();
    }
  }

  /**
   * nolock's version-column CAS, its unit one {@code update} under {@code retries}; with {@code
   * turns}, as by default, an update that keeps losing takes its turn, without them it never does.
   */
  static final class VersionColumnCas implements Subject {
    private final Bench.PgSchema schema = Bench.freshSchema(WORKERS + 1);
    private final boolean turns;
    private final VersionColumnStore<Long, Long> store;
    private final VersionColumnStore<Long, Long> inTurnAtOnce;

    VersionColumnCas(RetryPolicy retries, boolean turns) {
      this.turns = turns;
      schema.execute(
          "CREATE TABLE counters (id bigint PRIMARY KEY, version bigint NOT NULL,"
              + " value bigint NOT NULL)");
      schema.execute("INSERT INTO counters VALUES (0, 1, 0)");
      VersionColumnStoreConfig.Builder<Long, Long> config =
          VersionColumnStoreConfig.custom("counters", Long.class, ValueCodec.longs())
              .retryPolicy(retries);
      if (!turns) {
        config.neverTakeTurn();
      }
      store = VersionColumnStore.create(schema.dataSource(), config.build());
      inTurnAtOnce =
          VersionColumnStore.create(
              schema.dataSource(), config.takeTurnAfter(Duration.ZERO).build());
    }

    @Override
    public Tries work() {
      // The change runs once per attempt, after the attempt's read and before its write.
      int[] attempts = new int[1];
      boolean written =
          store
              .update(
                  0L,
                  value -> {
                    attempts[0]++;
                    return value + 1;
                  })
              .isRight();
      return new Tries(attempts[0], !written);
    }

    @Override
    public void stalledWork(Duration stall, Consumer<long[]> window) throws InterruptedException {
      if (!turns) { // the writer stops between its read and its write, where nobody waits
        Versioned<Long> read = store.read(0L).get();
        stall(stall, window);
        store.compareAndSet(0L, read.version(), read.value() + 1); // loses, as it should
        return;
      }
      boolean[] stalled = {false};
      inTurnAtOnce.update(
          0L,
          value -> {
            if (!stalled[0]) { // the change runs again after the turn is ended: stall once
              stalled[0] = true;
              try {
                stall(stall, window);
              } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IllegalStateException("interrupted in the stall", e);
              }
            }
            return value + 1;
          });
    }

    @Override
    public void close() {
      schema.close();
    }
  }

  /** nolock's {@code SKIP LOCKED} queue: claim one, complete it. */
  static final class SkipLockedQueue implements Subject {
    private static final int JOBS = 200_000;
    private final Bench.PgSchema schema = Bench.freshSchema(WORKERS + 1);
    private final JobQueue<byte[]> queue =
        JobQueue.create(
            schema.dataSource(), QueueConfig.ofDefaults("convoy"), PayloadCodec.bytes());

    SkipLockedQueue() {
      queue.createTableIfMissing();
      List<NewJob<byte[]>> batch = new ArrayList<>();
      for (int i = 0; i < JOBS; i++) {
        batch.add(NewJob.of(new byte[0]));
        if (batch.size() == 1_000) {
          queue.enqueueAll(batch);
          batch.clear();
        }
      }
    }

    @Override
    public Tries work() {
      List<Job<byte[]>> claimed = queue.claim(1);
      if (claimed.isEmpty()) {
        throw new IllegalStateException("the convoy queue ran dry; raise JOBS");
      }
      queue.complete(claimed.get(0));
      return Tries.done(1);
    }

    @Override
    public void stalledWork(Duration stall, Consumer<long[]> window) throws InterruptedException {
      List<Job<byte[]>> claimed = queue.claim(1);
      stall(stall, window);
      claimed.forEach(queue::complete);
    }

    @Override
    public void close() {
      schema.close();
    }
  }

  /**
   * Counts a fenced lock's requests for the lease on the calling thread, which is the thread that
   * waits: {@code FencedLock} asks on the caller's thread, and wake-ups only end its sleep.
   */
  private static final class CountingBackend implements FairLockBackend {
    private final FairLockBackend backend;
    private final ThreadLocal<int[]> requests;

    CountingBackend(FairLockBackend backend, ThreadLocal<int[]> requests) {
      this.backend = backend;
      this.requests = requests;
    }

    @Override
    public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
      requests.get()[0]++;
      return backend.tryAcquire(name, owner, ttl);
    }

    @Override
    public Option<FencingToken> tryAcquireInTurn(
        String name, String owner, Duration ttl, String waiter, Duration place, Duration patience) {
      requests.get()[0]++;
      return backend.tryAcquireInTurn(name, owner, ttl, waiter, place, patience);
    }

    @Override
    public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
      return backend.renew(name, owner, token, ttl);
    }

    @Override
    public boolean release(String name, String owner, FencingToken token) {
      return backend.release(name, owner, token);
    }

    @Override
    public Option<LeaseHolder> holder(String name) {
      return backend.holder(name);
    }

    @Override
    public void leaveQueue(String name, String waiter) {
      backend.leaveQueue(name, waiter);
    }

    @Override
    public Subscription onRelease(String name, String waiter, Runnable wake) {
      return backend.onRelease(name, waiter, wake);
    }

    @Override
    public boolean wakesWaiters() {
      return backend.wakesWaiters();
    }
  }

  private ConvoyHarness() {}
}
