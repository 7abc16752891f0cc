package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.PGConnection;

/** The worker pool against the real PostgreSQL: wake-up, concurrency, failures, shutdown. */
@ExtendWith(PostgresExtension.class)
class WorkerPoolIT {

  private static final AtomicInteger QUEUES = new AtomicInteger();

  private static PostgresSchema schema;
  private static JobRows rows;

  @BeforeAll
  static void createSchema(PostgresSchema s) {
    schema = s;
    JobQueue.create(s.dataSource(), QueueConfig.ofDefaults("setup"), PayloadCodec.utf8())
        .createTableIfMissing();
    rows = new JobRows(s.dsl(), QueueConfig.DEFAULT_TABLE);
  }

  private static JobQueue<String> queue(QueueConfig.Builder config) {
    return JobQueue.create(schema.dataSource(), config.build(), PayloadCodec.utf8());
  }

  private static QueueConfig.Builder newQueue() {
    return QueueConfig.custom("w" + QUEUES.incrementAndGet());
  }

  /** {@code count} jobs with the payloads "job-0", "job-1", ... */
  private static List<NewJob<String>> numbered(int count) {
    List<NewJob<String>> jobs = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      jobs.add(NewJob.of("job-" + i));
    }
    return jobs;
  }

  private static long id(EnqueueResult result) {
    return ((EnqueueResult.Enqueued) result).id();
  }

  @Test
  void aNewJobStartsWithinMillisecondsBecauseTheEnqueueNotifiesTheListeningPool() {
    MeterRegistry registry = new SimpleMeterRegistry();
    JobQueue<String> q = queue(newQueue().metrics(registry, "it"));
    // A 1-minute poll interval: once the pool's first claim has come back empty, only the
    // notification can start the job within 2 s.
    WorkerConfig config = WorkerConfig.custom().pollInterval(Duration.ofMinutes(1)).build();
    try (WorkerPool<String> pool = WorkerPool.start(q, config, job -> Completion.complete())) {
      await().atMost(Duration.ofSeconds(10)).until(() -> pool.wakeUp() == WakeUp.LISTENING);
      await().atMost(Duration.ofSeconds(10)).until(() -> claims(registry) >= 1);

      long id = id(q.enqueue(NewJob.of("wake up")));

      await().atMost(Duration.ofSeconds(2)).until(() -> rows.get(id).state() == JobState.DONE);
    }
  }

  @Test
  void withoutListenAJobWaitsForTheNextPoll() {
    MeterRegistry registry = new SimpleMeterRegistry();
    JobQueue<String> q = queue(newQueue().metrics(registry, "it"));
    WorkerConfig config =
        WorkerConfig.custom().listen(false).pollInterval(Duration.ofMinutes(1)).build();
    try (WorkerPool<String> pool = WorkerPool.start(q, config, job -> Completion.complete())) {
      await().atMost(Duration.ofSeconds(10)).until(() -> claims(registry) >= 1);

      long id = id(q.enqueue(NewJob.of("nobody hears")));

      // The control for the test above: the same 2 s pass without the job starting.
      await()
          .during(Duration.ofSeconds(2))
          .atMost(Duration.ofSeconds(3))
          .until(() -> rows.get(id).state() == JobState.READY);
    }
  }

  private static long claims(MeterRegistry registry) {
    return registry.get("nolock.queue.claim.duration").timer().count();
  }

  @Test
  void aPoolThatDoesNotListenPicksJobsUpByPolling() {
    JobQueue<String> q = queue(newQueue());
    try (WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom().listen(false).pollInterval(Duration.ofMillis(100)).build(),
            job -> Completion.complete())) {
      assertThat(pool.wakeUp()).isEqualTo(WakeUp.POLLING);
      long id = id(q.enqueue(NewJob.of("polled")));
      await().atMost(Duration.ofSeconds(5)).until(() -> rows.get(id).state() == JobState.DONE);
    }
  }

  @Test
  void noMoreThanConcurrencyHandlersRunAtOnce() throws Exception {
    JobQueue<String> q = queue(newQueue());
    List<NewJob<String>> jobs = numbered(30);
    q.enqueueAll(jobs);
    AtomicInteger running = new AtomicInteger();
    AtomicInteger maxRunning = new AtomicInteger();
    AtomicInteger done = new AtomicInteger();
    Semaphore entered = new Semaphore(0);
    Semaphore gate = new Semaphore(0);
    try (WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom().concurrency(3).batchSize(10).build(),
            job -> {
              maxRunning.accumulateAndGet(running.incrementAndGet(), Math::max);
              entered.release();
              try {
                if (!gate.tryAcquire(30, TimeUnit.SECONDS)) {
                  throw new IllegalStateException("the test never opened the gate");
                }
              } finally {
                running.decrementAndGet();
              }
              done.incrementAndGet();
              return Completion.complete();
            })) {
      assertThat(entered.tryAcquire(3, 10, TimeUnit.SECONDS)).isTrue();
      await().atMost(Duration.ofSeconds(5)).until(() -> pool.held() == 10);
      assertThat(running.get()).isEqualTo(3);
      assertThat(pool.held()).as("claimed up to max(concurrency, batchSize)").isEqualTo(10);

      gate.release(30);
      await().atMost(Duration.ofSeconds(20)).until(() -> done.get() == 30);
      assertThat(maxRunning.get()).isEqualTo(3);
    }
  }

  @Test
  void eachClaimInFlightHoldsUpToABatchMoreAndThePoolNeverHoldsMoreThanItsBound() throws Exception {
    // concurrency 1, batches of 2: one claim in flight holds max(1, 2) = 2 jobs, three hold
    // 2 + 2 * 2 = 6. The rows in the table, not the pool's own count, show what was claimed.
    assertThat(heldWithGateClosed(1)).as("one claim in flight (the default)").isEqualTo(2);
    assertThat(heldWithGateClosed(3)).as("three claims in flight").isEqualTo(6);
  }

  /**
   * Claimed jobs of a pool whose handler blocks, once nothing moves; then drains, bound checked.
   */
  private static long heldWithGateClosed(int claimsInFlight) throws Exception {
    JobQueue<String> q = queue(newQueue());
    List<NewJob<String>> jobs = numbered(30);
    q.enqueueAll(jobs);
    WorkerConfig config =
        WorkerConfig.custom().concurrency(1).batchSize(2).claimsInFlight(claimsInFlight).build();
    AtomicReference<WorkerPool<String>> self = new AtomicReference<>();
    AtomicInteger mostHeld = new AtomicInteger();
    AtomicInteger done = new AtomicInteger();
    Semaphore entered = new Semaphore(0);
    Semaphore gate = new Semaphore(0);
    try (WorkerPool<String> pool =
        WorkerPool.start(
            q,
            config,
            job -> {
              entered.release();
              if (!gate.tryAcquire(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("the test never opened the gate");
              }
              mostHeld.accumulateAndGet(self.get().held(), Math::max);
              done.incrementAndGet();
              return Completion.complete();
            })) {
      self.set(pool);
      assertThat(entered.tryAcquire(10, TimeUnit.SECONDS)).isTrue();
      await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> pool.held() >= config.maxHeld()); // then no place is left to reserve
      long running = rows.count(q.config().queue(), JobState.RUNNING);
      mostHeld.accumulateAndGet(pool.held(), Math::max);

      gate.release(30);
      await().atMost(Duration.ofSeconds(20)).until(() -> done.get() == 30);
      assertThat(mostHeld.get()).as("held at most maxHeld").isLessThanOrEqualTo(config.maxHeld());
      return running;
    }
  }

  @Test
  void closeEndsEveryCompleterOfAPoolWithSeveralClaimsInFlightAndEveryJobIsDone() throws Exception {
    // A long statement timeout: a completer that close() failed to end would hold close() for
    // the timeout plus a second before being interrupted, well past the 20 s this test allows.
    JobQueue<String> q = queue(newQueue().queryTimeout(Duration.ofMinutes(2)));
    List<NewJob<String>> jobs = numbered(30);
    q.enqueueAll(jobs);
    AtomicInteger ran = new AtomicInteger();
    WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom().concurrency(2).batchSize(2).claimsInFlight(4).build(),
            job -> {
              ran.incrementAndGet();
              return Completion.complete();
            });
    await().atMost(Duration.ofSeconds(20)).until(() -> ran.get() == 30);

    Thread closing = new Thread(pool::close);
    closing.start();
    closing.join(TimeUnit.SECONDS.toMillis(20));

    assertThat(closing.isAlive()).as("close() ended all four completers").isFalse();
    assertThat(rows.count(q.config().queue(), JobState.DONE)).isEqualTo(30);
    assertThat(Thread.getAllStackTraces().keySet())
        .extracting(Thread::getName)
        .noneMatch(name -> name.startsWith("nolock-queue-" + q.config().queue() + "-completer-"));
  }

  @Test
  void aCodecThatThrowsAnErrorFailsItsOwnJobAndTheRestOfTheClaimRuns() {
    // An AssertionError (or a missing class) from the codec, after the claim committed: the
    // poison job fails, its batch-mate runs at once instead of waiting out its lease.
    PayloadCodec<String> codec =
        PayloadCodec.of(
            p -> p.getBytes(StandardCharsets.UTF_8),
            bytes -> {
              String p = new String(bytes, StandardCharsets.UTF_8);
              if (p.equals("poison")) {
                throw new AssertionError("cannot read poison");
              }
              return p;
            });
    JobQueue<String> q =
        JobQueue.create(
            schema.dataSource(), newQueue().lease(Duration.ofMinutes(5)).build(), codec);
    long poison = id(q.enqueue(NewJob.of("poison")));
    long good = id(q.enqueue(NewJob.of("good")));
    try (WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom().concurrency(2).batchSize(2).claimsInFlight(2).build(),
            job -> Completion.complete())) {
      await().atMost(Duration.ofSeconds(10)).until(() -> rows.get(good).state() == JobState.DONE);
      await().atMost(Duration.ofSeconds(10)).until(() -> rows.get(poison).failures() == 1);
    }
  }

  @Test
  void claimsInFlightAreThatManyClaimStatementsWaitingOnTheServerAtOnce() throws Exception {
    assertThat(claimsWaitingBehindATableLock(1)).as("the default").isEqualTo(1);
    assertThat(claimsWaitingBehindATableLock(3)).isEqualTo(3);
  }

  /** Claim statements of a new pool blocked by an EXCLUSIVE table lock, once all have arrived. */
  private static int claimsWaitingBehindATableLock(int claimsInFlight) throws Exception {
    JobQueue<String> q = queue(newQueue());
    q.enqueue(NewJob.of("job"));
    int pid;
    try (Connection locker = schema.dataSource().getConnection()) {
      locker.setAutoCommit(false);
      DSLContext tx = DSL.using(locker, SQLDialect.POSTGRES);
      tx.execute("LOCK TABLE " + QueueConfig.DEFAULT_TABLE + " IN EXCLUSIVE MODE");
      pid = ((Number) tx.fetchValue("select pg_backend_pid()")).intValue();
      try (WorkerPool<String> pool =
          WorkerPool.start(
              q,
              WorkerConfig.custom()
                  .concurrency(1)
                  .batchSize(1)
                  .claimsInFlight(claimsInFlight)
                  .listen(false)
                  .build(),
              job -> Completion.complete())) {
        await().atMost(Duration.ofSeconds(10)).until(() -> blockedBy(pid) >= claimsInFlight);
        int blocked = blockedBy(pid);
        locker.rollback();
        return blocked;
      }
    }
  }

  /** Claim statements waiting for a lock that backend {@code pid} holds (not the reaper's). */
  private static int blockedBy(int pid) {
    Object count =
        schema
            .dsl()
            .fetchValue(
                "select count(*) from pg_stat_activity where ?::int = any(pg_blocking_pids(pid))"
                    + " and query like '%order by \"run_at\", \"id\"%'",
                pid);
    return ((Number) count).intValue();
  }

  @Test
  void aThrowingHandlerFailsTheAttemptAndTheJobIsDeadLetteredAfterItsLastAttempt() {
    MeterRegistry registry = new SimpleMeterRegistry();
    JobQueue<String> q =
        queue(
            newQueue()
                .maxAttempts(3)
                .backoff(Duration.ZERO, Duration.ofMillis(1))
                .metrics(registry, "it"));
    long id = id(q.enqueue(NewJob.of("poison")));
    Set<Long> attempts = ConcurrentHashMap.newKeySet();
    try (WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom().listen(false).pollInterval(Duration.ofMillis(50)).build(),
            job -> {
              attempts.add(job.attempt());
              throw new IllegalStateException("boom on attempt " + job.attempt());
            })) {
      await().atMost(Duration.ofSeconds(10)).until(() -> rows.get(id).state() == JobState.DEAD);
    }
    JobRows.Row row = rows.get(id);
    assertThat(attempts).containsExactlyInAnyOrder(1L, 2L, 3L);
    assertThat(row.lastError())
        .as("the exception's class; its message stays out (NoPayloadInErrorsIT)")
        .isEqualTo("java.lang.IllegalStateException");
    assertThat(registry.get("nolock.queue.failures").counter().count()).isEqualTo(3);
    assertThat(registry.get("nolock.queue.dead.letters").counter().count()).isEqualTo(1);
    assertThat(registry.get("nolock.queue.job.run").timer().count()).isEqualTo(3);
  }

  @Test
  void aCheckedExceptionFromTheHandlerFailsThatAttemptAndThePoolRetriesTheJobAndGoesOn() {
    JobQueue<String> q =
        queue(newQueue().maxAttempts(3).backoff(Duration.ZERO, Duration.ofMillis(1)));
    long flaky = id(q.enqueue(NewJob.of("flaky")));
    Set<Long> attempts = ConcurrentHashMap.newKeySet();
    try (WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom().listen(false).pollInterval(Duration.ofMillis(50)).build(),
            job -> {
              if (job.payload().equals("flaky")) {
                attempts.add(job.attempt());
                if (job.attempt() == 1) {
                  throw new java.io.IOException("disk full on attempt " + job.attempt());
                }
              }
              return Completion.complete();
            })) {
      await().atMost(Duration.ofSeconds(10)).until(() -> rows.get(flaky).state() == JobState.DONE);
      long next = id(q.enqueue(NewJob.of("next")));
      await().atMost(Duration.ofSeconds(10)).until(() -> rows.get(next).state() == JobState.DONE);
    }
    JobRows.Row row = rows.get(flaky);
    assertThat(attempts).containsExactlyInAnyOrder(1L, 2L);
    assertThat(row.failures()).as("the attempt that threw, counted as failed").isOne();
    assertThat(row.lastError()).isEqualTo("java.io.IOException");
  }

  @Test
  void completeWithCommitsTheHandlersWritesTogetherWithTheCompletion() {
    schema.dsl().execute("CREATE TABLE IF NOT EXISTS sent (job_id bigint, attempt bigint)");
    JobQueue<String> q = queue(newQueue());
    long id = id(q.enqueue(NewJob.of("mail")));
    try (WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom().pollInterval(Duration.ofMillis(100)).build(),
            job ->
                Completion.completeWith(
                    tx -> tx.execute("INSERT INTO sent VALUES (?, ?)", job.id(), job.attempt())))) {
      await().atMost(Duration.ofSeconds(5)).until(() -> rows.get(id).state() == JobState.DONE);
    }
    assertThat(
            schema
                .dsl()
                .fetch("SELECT attempt FROM sent WHERE job_id = ?", id)
                .getValues(0, Long.class))
        .containsExactly(1L);
  }

  /**
   * Writes that throw fail the attempt as a handler that threw does: counted with the exception's
   * class, retried after the backoff. The lease outlasts the test, so neither the reaper nor an
   * expired lease can be what finishes attempt 1.
   */
  @Test
  void aCheckedExceptionFromTheCompletionsWritesFailsThatAttemptAsAHandlerFailureDoes() {
    assertWritesThatThrowOnAttemptOneFailIt(
        new java.io.IOException("mail server down on attempt 1"), "java.io.IOException");
  }

  @Test
  void anUncheckedExceptionFromTheCompletionsWritesFailsThatAttemptAsAHandlerFailureDoes() {
    assertWritesThatThrowOnAttemptOneFailIt(
        new IllegalStateException("mailbox full on attempt 1"), "java.lang.IllegalStateException");
  }

  private static void assertWritesThatThrowOnAttemptOneFailIt(Exception failure, String error) {
    schema.dsl().execute("CREATE TABLE IF NOT EXISTS sent (job_id bigint, attempt bigint)");
    MeterRegistry registry = new SimpleMeterRegistry();
    JobQueue<String> q =
        queue(
            newQueue()
                .lease(Duration.ofMinutes(5))
                .maxAttempts(3)
                .backoff(Duration.ZERO, Duration.ofMillis(1))
                .metrics(registry, "it"));
    long id = id(q.enqueue(NewJob.of("mail")));
    try (WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom().listen(false).pollInterval(Duration.ofMillis(50)).build(),
            job ->
                Completion.completeWith(
                    tx -> {
                      tx.execute("INSERT INTO sent VALUES (?, ?)", job.id(), job.attempt());
                      if (job.attempt() == 1) {
                        throw failure;
                      }
                    }))) {
      await().atMost(Duration.ofSeconds(10)).until(() -> rows.get(id).state() == JobState.DONE);
    }
    JobRows.Row row = rows.get(id);
    assertThat(row.attempt()).isEqualTo(2);
    assertThat(row.failures()).as("the attempt whose writes threw, counted as failed").isOne();
    assertThat(row.lastError()).isEqualTo(error);
    assertThat(registry.get("nolock.queue.failures").counter().count()).isEqualTo(1);
    assertThat(
            schema
                .dsl()
                .fetch("SELECT attempt FROM sent WHERE job_id = ?", id)
                .getValues(0, Long.class))
        .as("attempt 1's write rolled back with its completion")
        .containsExactly(2L);
  }

  @Test
  void theReaperTakesBackTheJobOfAVanishedWorkerAndThePoolRunsItWithAHigherToken() {
    JobQueue<String> q = queue(newQueue());
    long id = id(q.enqueue(NewJob.of("orphan")));
    Job<String> orphan = q.claim(1).get(0); // a worker that claimed and crashed
    rows.expireLease(id);
    Set<Long> attempts = ConcurrentHashMap.newKeySet();
    try (WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom().reapInterval(Duration.ofMillis(200)).build(),
            job -> {
              attempts.add(job.attempt());
              return Completion.complete();
            })) {
      await().atMost(Duration.ofSeconds(10)).until(() -> rows.get(id).state() == JobState.DONE);
    }
    assertThat(attempts).containsExactly(orphan.attempt() + 1);
    assertThat(q.complete(orphan).isLeft()).as("the vanished worker's late finish").isTrue();
  }

  /**
   * The process paused longer than the lease: its own reaper re-queued the job and its own
   * dispatcher claimed it again, so one pool holds attempts 1 and 2 of one job. Its heartbeats
   * answer each attempt apart: attempt 2's lease is extended, attempt 1's expired one is not.
   */
  @Test
  void aPoolHoldingTwoAttemptsOfOneJobExtendsOnlyTheCurrentAttemptsLease() throws Exception {
    MeterRegistry registry = new SimpleMeterRegistry();
    JobQueue<String> q = queue(newQueue().metrics(registry, "it"));
    Gates gates = new Gates("J#1", "J#2");
    long j = id(q.enqueue(NewJob.of("J")));
    WorkerPool<String> pool = WorkerPool.start(q, holdingTwoAttempts(), gates::handle);
    try {
      holdTwoAttempts(q, gates, j);

      // A renewal counted after attempt 2 was claimed came from a heartbeat that held both
      // attempts; three more mean at least two whole heartbeats ran after that reading.
      double refusedBefore = counter(registry, "nolock.renewal.failures");
      double renewed = counter(registry, "nolock.renewals");
      await()
          .atMost(Duration.ofSeconds(10))
          .until(() -> counter(registry, "nolock.renewals") >= renewed + 3);
      assertThat(counter(registry, "nolock.renewal.failures"))
          .as("heartbeats that refused attempt 1's expired lease while attempt 2 was held")
          .isGreaterThan(refusedBefore);
      assertThat(rows.get(j).attempt()).isEqualTo(2);
    } finally {
      gates.openAll();
      pool.close();
    }
  }

  /**
   * The same two attempts finish together: both completions go out in one completer batch, with
   * another job's. Attempt 1 is refused alone; attempt 2 and the other job complete.
   */
  @Test
  void aPoolHoldingTwoAttemptsOfOneJobCompletesTheirBatchAndRefusesOnlyTheStaleAttempt()
      throws Exception {
    MeterRegistry registry = new SimpleMeterRegistry();
    JobQueue<String> q = queue(newQueue().metrics(registry, "it"));
    Gates gates = new Gates("J#1", "J#2", "K#1", "L#1");
    long j = id(q.enqueue(NewJob.of("J")));
    WorkerPool<String> pool = WorkerPool.start(q, holdingTwoAttempts(), gates::handle);
    try {
      holdTwoAttempts(q, gates, j);
      long k = id(q.enqueue(NewJob.of("K")));
      long l = id(q.enqueue(NewJob.of("L")));
      gates.awaitEntered("K#1");
      gates.awaitEntered("L#1");

      // Hold the completer in a statement on K's row, so that the completions of both attempts
      // of J and of L queue up behind it and go out together in its next batch.
      try (Connection locking = schema.dataSource().getConnection()) {
        locking.setAutoCommit(false);
        DSLContext tx = DSL.using(locking, SQLDialect.POSTGRES);
        int lockPid = locking.unwrap(PGConnection.class).getBackendPID();
        tx.execute("SELECT id FROM nolock_jobs WHERE id = ? FOR UPDATE", k);
        gates.open("K#1");
        await()
            .atMost(Duration.ofSeconds(10))
            .until(() -> backendsBlockedBy(lockPid) == 1); // the completer, on K's row
        gates.open("J#1");
        gates.open("J#2");
        gates.open("L#1");
        await().atMost(Duration.ofSeconds(10)).until(() -> pool.held() == 0);
        locking.rollback();
      }
      pool.close(); // sends the waiting batch and returns once the completer has ended

      assertThat(rows.get(l).state())
          .as("L, completed in the batch that held both attempts of J")
          .isEqualTo(JobState.DONE);
      assertThat(rows.get(j).state()).isEqualTo(JobState.DONE);
      assertThat(rows.get(j).attempt()).isEqualTo(2);
      assertThat(rows.get(k).state()).isEqualTo(JobState.DONE);
      assertThat(counter(registry, "nolock.queue.completions")).isEqualTo(3);
      assertThat(
              registry
                  .get("nolock.queue.stale.finishes")
                  .tags("operation", "complete")
                  .counter()
                  .count())
          .as("attempt 1's completion, refused")
          .isEqualTo(1);
    } finally {
      gates.openAll();
      pool.close();
    }
  }

  /** Polls fast (the test reaps by hand) and heartbeats often, so both happen within the test. */
  private static WorkerConfig holdingTwoAttempts() {
    return WorkerConfig.custom()
        .concurrency(4)
        .listen(false)
        .pollInterval(Duration.ofMillis(50))
        .heartbeatInterval(Duration.ofMillis(100))
        .reapInterval(Duration.ofHours(1))
        .build();
  }

  /**
   * Attempt 1 of job {@code j} runs on, paused past its lease as far as the database can tell; the
   * reaper (called here, as the pool's own would) re-queues the job and the same pool claims it.
   */
  private static void holdTwoAttempts(JobQueue<String> q, Gates gates, long j)
      throws InterruptedException {
    gates.awaitEntered("J#1");
    rows.expireLease(j);
    assertThat(q.reapExpired()).isEqualTo(new ReapResult(1, 0));
    gates.awaitEntered("J#2");
  }

  private static long backendsBlockedBy(int pid) {
    Object blocked =
        schema
            .dsl()
            .fetchValue(
                "SELECT count(*) FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))", pid);
    return ((Number) blocked).longValue();
  }

  private static double counter(MeterRegistry registry, String name) {
    return registry.get(name).counter().count();
  }

  /** A handler per {@code payload#attempt} that the test sees start and lets return. */
  private static final class Gates {
    private final Map<String, CountDownLatch> entered = new ConcurrentHashMap<>();
    private final Map<String, CountDownLatch> go = new ConcurrentHashMap<>();

    Gates(String... keys) {
      for (String key : keys) {
        entered.put(key, new CountDownLatch(1));
        go.put(key, new CountDownLatch(1));
      }
    }

    Completion handle(Job<String> job) throws InterruptedException {
      String key = job.payload() + "#" + job.attempt();
      entered.get(key).countDown();
      if (!go.get(key).await(30, TimeUnit.SECONDS)) {
        throw new IllegalStateException("the test never let " + key + " return");
      }
      return Completion.complete();
    }

    void awaitEntered(String key) throws InterruptedException {
      assertThat(entered.get(key).await(10, TimeUnit.SECONDS)).as("%s started", key).isTrue();
    }

    void open(String key) {
      go.get(key).countDown();
    }

    void openAll() {
      go.values().forEach(CountDownLatch::countDown);
    }
  }

  @Test
  void aPoolWithAVacuumIntervalVacuumsItsTableAndOneWithoutDoesNot() {
    JobQueue<String> q = queue(newQueue());
    long before = rows.vacuumCount();
    try (WorkerPool<String> plain =
        WorkerPool.start(q, WorkerConfig.ofDefaults(), job -> Completion.complete())) {
      // Holding a condition for a while is an assertion, not a synchronisation.
      await()
          .during(Duration.ofSeconds(2))
          .atMost(Duration.ofSeconds(3))
          .until(() -> rows.vacuumCount() == before);
    }
    try (WorkerPool<String> vacuuming =
        WorkerPool.start(
            q,
            WorkerConfig.custom().vacuumInterval(Duration.ofSeconds(1)).build(),
            job -> Completion.complete())) {
      await().atMost(Duration.ofSeconds(15)).until(() -> rows.vacuumCount() >= before + 2);
    }
  }

  @Test
  void closeLetsARunningHandlerFinishWithinTheShutdownTimeout() throws Exception {
    JobQueue<String> q = queue(newQueue());
    long id = id(q.enqueue(NewJob.of("in flight")));
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom().shutdownTimeout(Duration.ofSeconds(30)).build(),
            job -> {
              entered.countDown();
              if (!finish.await(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("never told to finish");
              }
              return Completion.complete();
            });
    assertThat(entered.await(10, TimeUnit.SECONDS)).isTrue();

    Thread closing = new Thread(pool::close);
    closing.start();
    await().atMost(Duration.ofSeconds(5)).until(() -> !pool.isRunning());
    finish.countDown();
    closing.join(TimeUnit.SECONDS.toMillis(30));

    assertThat(closing.isAlive()).isFalse();
    assertThat(rows.get(id).state()).isEqualTo(JobState.DONE);
  }

  @Test
  void closeHandsBackUnstartedJobsAndThoseWhoseHandlersOverrunTheTimeout() throws Exception {
    JobQueue<String> q = queue(newQueue());
    List<NewJob<String>> jobs = numbered(5);
    List<Long> ids = q.enqueueAll(jobs).stream().map(WorkerPoolIT::id).toList();
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch never = new CountDownLatch(1);
    WorkerPool<String> pool =
        WorkerPool.start(
            q,
            WorkerConfig.custom()
                .concurrency(1)
                .batchSize(5)
                .shutdownTimeout(Duration.ofMillis(200))
                .build(),
            job -> {
              entered.countDown();
              never.await(); // stuck until interrupted
              return Completion.complete();
            });
    assertThat(entered.await(10, TimeUnit.SECONDS)).isTrue();
    await().atMost(Duration.ofSeconds(5)).until(() -> pool.held() == 5);

    Thread closing = new Thread(pool::close);
    closing.start();
    closing.join(TimeUnit.SECONDS.toMillis(20));

    assertThat(closing.isAlive()).as("close() returned within its bound").isFalse();
    for (long id : ids) {
      JobRows.Row row = rows.get(id);
      assertThat(row.state()).as("job %d", id).isEqualTo(JobState.READY);
      assertThat(row.failures()).as("handed back, not failed").isZero();
      assertThat(row.attempt()).isOne();
    }
    assertThat(q.claim(5)).extracting(Job::attempt).containsOnly(2L);
  }
}
