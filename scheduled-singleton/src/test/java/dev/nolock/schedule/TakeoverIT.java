package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.schedule.internal.RunTable;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Leases and attempt tokens on the real table, in one JVM: a run whose instance died is taken over
 * after its lease expires; a live run is not, because its lease is renewed; a stale fenced finish
 * rolls the job's writes back; a job that throws is retried up to its attempts.
 */
@ExtendWith(PostgresExtension.class)
class TakeoverIT {

  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");
  private static final Instant MINUTE = Instant.parse("2026-03-10T10:01:00Z");

  private static DataSource pool;
  private static DSLContext db;
  private static Runs runs;
  private static HikariDataSource noAutoCommit;

  @BeforeAll
  static void createTables(PostgresSchema schema) {
    pool = schema.dataSource();
    db = schema.dsl();
    runs = new Runs(db);
    ScheduledSingleton.plain(pool, ScheduleConfig.custom("setup", EVERY_MINUTE).build(), r -> {})
        .createTableIfMissing();
    db.execute(
        "CREATE TABLE ledger (job text NOT NULL, scheduled_at timestamptz NOT NULL,"
            + " attempt bigint NOT NULL, instance text NOT NULL)"); // no unique key
    HikariConfig hikari = new HikariConfig();
    hikari.setJdbcUrl(schema.jdbcUrl());
    hikari.setAutoCommit(false);
    hikari.setMaximumPoolSize(3);
    hikari.setPoolName("no-autocommit");
    noAutoCommit = new HikariDataSource(hikari);
  }

  @AfterAll
  static void closePool() {
    noAutoCommit.close();
  }

  /**
   * The wall clock of one test: instances start half a minute before MINUTE (a new job does not run
   * times before its start); {@link #due} moves it just past MINUTE.
   */
  private final MutableClock clock = new MutableClock(MINUTE.minusSeconds(30));

  private ScheduleConfig.Builder config(String job) {
    return ScheduleConfig.custom(job, EVERY_MINUTE).clock(clock).claimWindow(MutableClock.ANY_DATE);
  }

  private void due() {
    clock.set(MINUTE.plusMillis(100));
  }

  private static void ledger(DSLContext tx, ScheduledRun run, String instance) {
    tx.execute(
        "INSERT INTO ledger (job, scheduled_at, attempt, instance)"
            + " VALUES (?, CAST(? AS timestamptz), ?, ?)",
        run.job(),
        OffsetDateTime.ofInstant(run.scheduledAt(), ZoneOffset.UTC),
        run.attempt().value(),
        instance);
  }

  private static List<Long> ledgerAttempts(String job) {
    return db.resultQuery("SELECT attempt FROM ledger WHERE job = ? ORDER BY attempt", job)
        .fetch(0, Long.class);
  }

  @Test
  void aRunWhoseInstanceDiedIsTakenOverAfterItsLeaseExpiresWithTheNextAttempt() {
    String job = "died";
    RunTable table = new RunTable(ScheduleConfig.DEFAULT_TABLE, Duration.ofSeconds(5));
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    AtomicInteger ran = new AtomicInteger();

    // The survivor's pool hands out connections with autocommit off: claims must still commit.
    try (ScheduledSingleton survivor =
        ScheduledSingleton.fenced(
            noAutoCommit,
            config(job).metrics(registry, job).build(),
            (run, tx) -> {
              ran.incrementAndGet();
              ledger(tx, run, "survivor");
            })) {
      due();
      // What a crashed instance leaves behind: its claim, with a 3 s lease, never finished.
      assertThat(
              table
                  .claim(
                      db,
                      job,
                      MINUTE,
                      "dead-instance",
                      Duration.ofSeconds(3),
                      MutableClock.ANY_DATE,
                      Duration.ZERO,
                      Optional.empty(),
                      MINUTE,
                      0)
                  .granted())
          .isPresent();
      assertThat(survivor.runDueNow())
          .as("the dead instance's lease has not expired yet, and the time is claimed")
          .containsExactly(new RunOutcome.LostClaim(MINUTE));
      await("the lease expires on the database's clock and the run is taken over")
          .atMost(Duration.ofSeconds(10))
          .pollInterval(Duration.ofMillis(200))
          .until(() -> !survivor.runDueNow().isEmpty());
    }

    assertThat(ran).hasValue(1);
    assertThat(runs.at(job, MINUTE))
        .hasValueSatisfying(
            row -> {
              assertThat(row.state()).isEqualTo("done");
              assertThat(row.attempt()).isEqualTo(2);
              assertThat(row.owner()).isNotEqualTo("dead-instance");
            });
    assertThat(ledgerAttempts(job)).containsExactly(2L);
    assertThat(registry.get("nolock.schedule.taken.over").counter().count()).isEqualTo(1);
  }

  /**
   * The pass that takes over the time due now (its claimer died) then plans that time: the claim
   * conflicts with the row it just finished, which is this instance's and no lost race.
   */
  @Test
  void aTimeThisInstanceTookOverAndRanIsNotAlsoReportedAsLostToAnotherInstance() {
    String job = "taken-over-not-lost";
    RunTable table = new RunTable(ScheduleConfig.DEFAULT_TABLE, Duration.ofSeconds(5));
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (ScheduledSingleton survivor =
        ScheduledSingleton.fenced(
            pool,
            config(job).metrics(registry, job).build(),
            (run, tx) -> ledger(tx, run, "survivor"))) {
      due();
      assertThat(
              table
                  .claim(
                      db,
                      job,
                      MINUTE,
                      "dead-instance",
                      Duration.ofSeconds(3),
                      MutableClock.ANY_DATE,
                      Duration.ZERO,
                      Optional.empty(),
                      MINUTE,
                      0)
                  .granted())
          .isPresent();
      runs.expireLease(job, MINUTE);

      List<RunOutcome> outcomes = survivor.runDueNow();

      assertThat(outcomes)
          .as("the time this instance took over and ran is not also a claim lost to another")
          .noneMatch(outcome -> outcome instanceof RunOutcome.LostClaim);
      assertThat(outcomes).singleElement().isInstanceOf(RunOutcome.Finished.class);
    }
    assertThat(ledgerAttempts(job)).containsExactly(2L);
    assertThat(registry.get("nolock.schedule.skipped").counter().count()).isZero();
  }

  @Test
  void aLiveRunIsNotTakenOverBecauseItsLeaseIsRenewed() throws Exception {
    String job = "renewed";
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    SimpleMeterRegistry registryA = new SimpleMeterRegistry();
    Duration lease = Duration.ofSeconds(3);
    try (ScheduledSingleton a =
            ScheduledSingleton.plain(
                pool,
                config(job).lease(lease).metrics(registryA, "a").build(),
                run -> {
                  entered.countDown();
                  release.await();
                });
        ScheduledSingleton b =
            ScheduledSingleton.plain(pool, config(job).lease(lease).build(), run -> {})) {
      due();
      CompletableFuture<List<RunOutcome>> running = CompletableFuture.supplyAsync(a::runDueNow);
      assertThat(entered.await(30, TimeUnit.SECONDS)).isTrue();

      assertThat(b.runDueNow()).containsExactly(new RunOutcome.LostClaim(MINUTE));
      // Longer than the lease: without renewals B would take the run over.
      await("B finds nothing to take over while A renews")
          .during(lease.plusSeconds(1))
          .atMost(lease.plusSeconds(5))
          .pollInterval(Duration.ofMillis(250))
          .until(() -> b.runDueNow().isEmpty());

      release.countDown();
      List<RunOutcome> outcomes = running.get(30, TimeUnit.SECONDS);
      assertThat(outcomes).singleElement().isInstanceOf(RunOutcome.Finished.class);
    }

    assertThat(runs.at(job, MINUTE)).hasValueSatisfying(row -> assertThat(row.attempt()).isOne());
    assertThat(registryA.get("nolock.renewals").counter().count()).isGreaterThanOrEqualTo(2);
  }

  @Test
  void aStaleFencedFinishRollsBackEverythingTheJobWrote() throws Exception {
    String job = "stale-fenced";
    CountDownLatch wrote = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    SimpleMeterRegistry registryA = new SimpleMeterRegistry();
    try (ScheduledSingleton a =
            ScheduledSingleton.fenced(
                pool,
                config(job).metrics(registryA, "a").build(),
                (run, tx) -> {
                  ledger(tx, run, "a");
                  wrote.countDown();
                  finish.await(); // A pauses between its writes and its finish
                });
        ScheduledSingleton b =
            ScheduledSingleton.fenced(
                pool, config(job).build(), (run, tx) -> ledger(tx, run, "b"))) {
      due();
      CompletableFuture<List<RunOutcome>> running = CompletableFuture.supplyAsync(a::runDueNow);
      assertThat(wrote.await(30, TimeUnit.SECONDS)).isTrue();

      // The pause outlasts A's lease (A's renewals cannot revive an expired lease).
      runs.expireLease(job, MINUTE);
      List<RunOutcome> takeover = b.runDueNow();
      assertThat(takeover)
          .first()
          .isInstanceOfSatisfying(
              RunOutcome.Finished.class, f -> assertThat(f.run().attempt().value()).isEqualTo(2));

      finish.countDown(); // A wakes up and finishes late
      List<RunOutcome> late = running.get(30, TimeUnit.SECONDS);
      assertThat(late)
          .singleElement()
          .isInstanceOfSatisfying(
              RunOutcome.StaleAttempt.class,
              s -> assertThat(s.run().attempt().value()).isEqualTo(1));
    }

    assertThat(
            db.resultQuery("SELECT instance FROM ledger WHERE job = ?", job).fetch(0, String.class))
        .as("A's write was attempted and rolled back; only B's committed")
        .containsExactly("b");
    assertThat(ledgerAttempts(job)).containsExactly(2L);
    assertThat(runs.at(job, MINUTE))
        .hasValueSatisfying(
            row -> {
              assertThat(row.state()).isEqualTo("done");
              assertThat(row.attempt()).isEqualTo(2);
            });
    assertThat(registryA.get("nolock.schedule.stale.finishes").counter().count()).isEqualTo(1);
    assertThat(registryA.get("nolock.fence.rejections").counter().count()).isEqualTo(1);
  }

  @Test
  void aJobThatThrowsIsRetriedWithTheNextAttemptAndRecordedFailedAfterTheLast() {
    String job = "throws";
    AtomicInteger attempts = new AtomicInteger();
    try (ScheduledSingleton instance =
        ScheduledSingleton.fenced(
            pool,
            config(job).maxAttempts(2).build(),
            (run, tx) -> {
              attempts.incrementAndGet();
              ledger(tx, run, "x");
              throw new IllegalStateException("boom " + run.attempt().value());
            })) {
      due();
      assertThat(instance.runDueNow())
          .singleElement()
          .isInstanceOfSatisfying(RunOutcome.Failed.class, f -> assertThat(f.willRetry()).isTrue());
      assertThat(runs.at(job, MINUTE))
          .hasValueSatisfying(
              row -> {
                assertThat(row.state()).isEqualTo("running");
                assertThat(row.lastError()).isEqualTo("java.lang.IllegalStateException");
              });

      assertThat(instance.runDueNow())
          .as("the released run is taken over at once, with attempt 2, the last")
          .singleElement()
          .isInstanceOfSatisfying(
              RunOutcome.Failed.class,
              f -> {
                assertThat(f.run().attempt().value()).isEqualTo(2);
                assertThat(f.willRetry()).isFalse();
              });
      assertThat(instance.runDueNow()).isEmpty();
    }

    assertThat(attempts).hasValue(2);
    assertThat(ledgerAttempts(job)).as("both attempts' writes were rolled back").isEmpty();
    assertThat(runs.at(job, MINUTE))
        .hasValueSatisfying(
            row -> {
              assertThat(row.state()).isEqualTo("failed");
              assertThat(row.lastError()).isEqualTo("java.lang.IllegalStateException");
            });
  }

  @Test
  void aRunWhoseLastAttemptsLeaseExpiredIsGivenUpNotTakenOverAgain() {
    String job = "gave-up";
    RunTable table = new RunTable(ScheduleConfig.DEFAULT_TABLE, Duration.ofSeconds(5));
    table.claim(
        db,
        job,
        MINUTE,
        "dead-instance",
        Duration.ofSeconds(30),
        MutableClock.ANY_DATE,
        Duration.ZERO,
        Optional.empty(),
        MINUTE,
        0);
    db.execute("UPDATE nolock_scheduled_runs SET attempt = 3 WHERE job = ?", job);
    runs.expireLease(job, MINUTE);
    AtomicInteger ran = new AtomicInteger();

    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            pool, config(job).maxAttempts(3).build(), run -> ran.incrementAndGet())) {
      due();
      assertThat(instance.runDueNow())
          .containsExactly(new RunOutcome.GaveUp(MINUTE, 3), new RunOutcome.LostClaim(MINUTE));
    }

    assertThat(ran).hasValue(0);
    assertThat(runs.at(job, MINUTE))
        .hasValueSatisfying(
            row -> {
              assertThat(row.state()).isEqualTo("failed");
              assertThat(row.lastError()).contains("gave up");
            });
  }
}
