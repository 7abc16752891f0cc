package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.LongPredicate;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A cancel racing a claim, in real concurrent transactions: one of them wins, never both. A
 * cancelled job is never run; a running job is never reported cancelled.
 *
 * <p>Each scenario holds the first transaction open after its statement, right before its COMMIT (a
 * pool whose {@code commit()} waits on a latch), starts the other side, and lets the first commit
 * only once PostgreSQL shows the other side waiting for the first one's row lock, or done. Each
 * runs twice: with the queue's statements, and, as the negative control, with the protecting
 * condition taken out of the side that must lose (a cancel without {@code state = 'ready'}, a claim
 * by id that neither skips locked rows nor re-checks the state); the control must be caught.
 */
@ExtendWith(PostgresExtension.class)
class CancelRacesClaimIT {

  private static final AtomicInteger QUEUES = new AtomicInteger();

  private static PostgresSchema schema;
  private static HikariDataSource transactional;
  private static ExecutorService threads;

  @BeforeAll
  static void setUp(PostgresSchema s) {
    schema = s;
    JobQueue.create(s.dataSource(), QueueConfig.ofDefaults("setup"), PayloadCodec.utf8())
        .createTableIfMissing();
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(s.jdbcUrl());
    config.setAutoCommit(false); // so that each statement of the queue ends in a commit() call
    config.setMaximumPoolSize(4);
    transactional = new HikariDataSource(config);
    threads = Executors.newCachedThreadPool();
  }

  @AfterAll
  static void tearDown() {
    threads.shutdownNow();
    transactional.close();
  }

  private static String newQueueName() {
    return "race-" + QUEUES.incrementAndGet();
  }

  // ---------------------------------------------------------------------------------------------
  // The claim locks the row first

  /** What a cancel reported: true for "cancelled". */
  private static LongPredicate realCancel(JobQueue<String> q) {
    return id -> q.admin().cancel(id).isRight();
  }

  /** The control: the cancel without {@code AND state = 'ready'}. */
  private static LongPredicate unprotectedCancel(String queue) {
    return id ->
        schema
                .dsl()
                .execute(
                    "UPDATE nolock_jobs SET state = 'cancelled', finished_at = clock_timestamp()"
                        + " WHERE queue = ? AND id = ?",
                    queue,
                    id)
            == 1;
  }

  /** Claim first, held before its COMMIT; then the cancel; returns what went wrong, if anything. */
  private static String claimThenCancel(String name, LongPredicate cancel) throws Exception {
    CommitGate gate = new CommitGate();
    JobQueue<String> claiming =
        JobQueue.create(
            gate.wrap(transactional), QueueConfig.ofDefaults(name), PayloadCodec.utf8());
    JobQueue<String> direct =
        JobQueue.create(schema.dataSource(), QueueConfig.ofDefaults(name), PayloadCodec.utf8());
    long id = ((EnqueueResult.Enqueued) direct.enqueue(NewJob.of("x"))).id();

    CompletableFuture<List<Job<String>>> claim =
        CompletableFuture.supplyAsync(gate.gated(() -> claiming.claim(1)), threads);
    gate.awaitReached();
    CompletableFuture<Boolean> cancelled =
        CompletableFuture.supplyAsync(() -> cancel.test(id), threads);
    awaitBlockedBy(gate.backendPid(), cancelled);
    gate.open();

    List<Job<String>> claimed = claim.get(10, TimeUnit.SECONDS);
    boolean reportedCancelled = cancelled.get(10, TimeUnit.SECONDS);
    String state = state(id);
    assertThat(claimed).as("the claim, which locked the job first").hasSize(1);
    return verdict(!claimed.isEmpty(), reportedCancelled, state);
  }

  @Test
  void aCancelThatMeetsAClaimedJobIsRefusedAndTheJobRuns() throws Exception {
    String name = newQueueName();
    JobQueue<String> q =
        JobQueue.create(schema.dataSource(), QueueConfig.ofDefaults(name), PayloadCodec.utf8());

    assertThat(claimThenCancel(name, realCancel(q))).isEmpty();
  }

  @Test
  void controlACancelWithoutTheStateConditionCancelsARunningJob() throws Exception {
    String name = newQueueName();

    assertThat(claimThenCancel(name, unprotectedCancel(name)))
        .as("the negative control must be caught")
        .contains("both won");
  }

  // ---------------------------------------------------------------------------------------------
  // The cancel locks the row first

  /** What a claim took: true when it claimed the job. */
  private static LongPredicate realClaim(JobQueue<String> q) {
    return id -> q.claim(10).stream().anyMatch(job -> job.id() == id);
  }

  /** The control: a claim by id that waits for the row and does not re-check its state. */
  private static LongPredicate unprotectedClaim(String queue) {
    return id ->
        schema
                .dsl()
                .execute(
                    "UPDATE nolock_jobs SET state = 'running', attempt = attempt + 1,"
                        + " locked_until = clock_timestamp() + interval '30 seconds'"
                        + " WHERE queue = ? AND id = ?",
                    queue,
                    id)
            == 1;
  }

  /** Cancel first, held before its COMMIT; then the claim; returns what went wrong, if anything. */
  private static String cancelThenClaim(String name, LongPredicate claim) throws Exception {
    CommitGate gate = new CommitGate();
    JobQueue<String> cancelling =
        JobQueue.create(
            gate.wrap(transactional), QueueConfig.ofDefaults(name), PayloadCodec.utf8());
    JobQueue<String> direct =
        JobQueue.create(schema.dataSource(), QueueConfig.ofDefaults(name), PayloadCodec.utf8());
    long id = ((EnqueueResult.Enqueued) direct.enqueue(NewJob.of("x"))).id();

    CompletableFuture<Boolean> cancelled =
        CompletableFuture.supplyAsync(
            gate.gated(() -> cancelling.admin().cancel(id).isRight()), threads);
    gate.awaitReached();
    CompletableFuture<Boolean> claimed =
        CompletableFuture.supplyAsync(() -> claim.test(id), threads);
    awaitBlockedBy(gate.backendPid(), claimed);
    gate.open();

    boolean tookIt = claimed.get(10, TimeUnit.SECONDS);
    boolean reportedCancelled = cancelled.get(10, TimeUnit.SECONDS);
    boolean claimedLater = claim.test(id);
    assertThat(reportedCancelled).as("the cancel, which locked the job first").isTrue();
    return verdict(tookIt || claimedLater, reportedCancelled, state(id));
  }

  @Test
  void aClaimThatMeetsACancelledJobSkipsItAndNoLaterClaimTakesIt() throws Exception {
    String name = newQueueName();
    JobQueue<String> q =
        JobQueue.create(schema.dataSource(), QueueConfig.ofDefaults(name), PayloadCodec.utf8());

    assertThat(cancelThenClaim(name, realClaim(q))).isEmpty();
  }

  @Test
  void controlAClaimWithoutTheStateConditionRunsACancelledJob() throws Exception {
    String name = newQueueName();

    assertThat(cancelThenClaim(name, unprotectedClaim(name)))
        .as("the negative control must be caught")
        .contains("both won");
  }

  // ---------------------------------------------------------------------------------------------

  /** Empty when exactly one side won and the row agrees; else what went wrong. */
  private static String verdict(boolean claimed, boolean reportedCancelled, String state) {
    if (claimed && reportedCancelled) {
      return "both won: the job was claimed and the cancel reported it cancelled (row: "
          + state
          + ")";
    }
    if (!claimed && !reportedCancelled) {
      return "neither won (row: " + state + ")";
    }
    String expected = claimed ? "running" : "cancelled";
    return expected.equals(state) ? "" : "the row says " + state + ", expected " + expected;
  }

  private static String state(long id) {
    return schema.dsl().fetchValue("SELECT state FROM nolock_jobs WHERE id = ?", id).toString();
  }

  /**
   * Waits until PostgreSQL shows a backend waiting for {@code holder}'s locks, or {@code other} is
   * done already (a side that does not wait, such as a claim that skips locked rows).
   */
  private static void awaitBlockedBy(int holder, CompletableFuture<?> other) {
    await()
        .atMost(Duration.ofSeconds(10))
        .until(
            () ->
                other.isDone()
                    || ((Number)
                                schema
                                    .dsl()
                                    .fetchValue(
                                        "SELECT count(*) FROM pg_stat_activity"
                                            + " WHERE ? = ANY(pg_blocking_pids(pid))",
                                        holder))
                            .longValue()
                        > 0);
  }

  /** Holds the gated thread's next {@code commit()} until {@link #open()}. */
  private static final class CommitGate {
    private final CountDownLatch reached = new CountDownLatch(1);
    private final CountDownLatch opened = new CountDownLatch(1);
    private volatile Thread gated;
    private volatile int backendPid;

    <R> Supplier<R> gated(Supplier<R> body) {
      return () -> {
        gated = Thread.currentThread();
        try {
          return body.get();
        } finally {
          gated = null;
        }
      };
    }

    void awaitReached() throws InterruptedException {
      assertThat(reached.await(10, TimeUnit.SECONDS)).as("the gated COMMIT was reached").isTrue();
    }

    int backendPid() {
      return backendPid;
    }

    void open() {
      opened.countDown();
    }

    DataSource wrap(DataSource pool) {
      InvocationHandler onPool =
          (proxy, method, args) -> {
            Object result = invoke(pool, method, args);
            if (result instanceof Connection c) {
              return Proxy.newProxyInstance(
                  Connection.class.getClassLoader(),
                  new Class<?>[] {Connection.class},
                  (p, m, a) -> {
                    if (m.getName().equals("commit")
                        && Thread.currentThread() == gated
                        && reached.getCount() > 0) {
                      backendPid = pid(c);
                      reached.countDown();
                      if (!opened.await(10, TimeUnit.SECONDS)) {
                        throw new SQLException("the gate was never opened");
                      }
                    }
                    return invoke(c, m, a);
                  });
            }
            return result;
          };
      return (DataSource)
          Proxy.newProxyInstance(
              DataSource.class.getClassLoader(), new Class<?>[] {DataSource.class}, onPool);
    }

    private static int pid(Connection c) throws SQLException {
      try (PreparedStatement s = c.prepareStatement("SELECT pg_backend_pid()");
          ResultSet r = s.executeQuery()) {
        r.next();
        return r.getInt(1);
      }
    }

    private static Object invoke(Object target, Method method, Object[] args) throws Throwable {
      try {
        return method.invoke(target, args);
      } catch (InvocationTargetException e) {
        throw e.getCause();
      }
    }
  }
}
