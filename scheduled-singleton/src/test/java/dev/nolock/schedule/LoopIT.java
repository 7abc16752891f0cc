package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.io.PrintWriter;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.SQLFeatureNotSupportedException;
import java.sql.SQLTransientConnectionException;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.logging.Logger;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The background loop on the real wall clock: wakes, graceful shutdown, backoff after failures. */
@ExtendWith(PostgresExtension.class)
class LoopIT {

  private static final CronSchedule EVERY_SECOND = CronSchedule.quartz("* * * * * ?");

  private static DataSource pool;
  private static Runs runs;
  private static DSLContext db;

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    pool = schema.dataSource();
    runs = new Runs(schema.dsl());
    db = schema.dsl();
    ScheduledSingleton.plain(pool, ScheduleConfig.custom("setup", EVERY_SECOND).build(), r -> {})
        .createTableIfMissing();
  }

  @Test
  void theLoopWakesAtEachScheduledTimeAndRunsItOnce() {
    List<Instant> ran = new CopyOnWriteArrayList<>();
    List<RunOutcome> outcomes = new CopyOnWriteArrayList<>();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (ScheduledSingleton loop =
        ScheduledSingleton.plain(
            pool,
            ScheduleConfig.custom("loop", EVERY_SECOND)
                .missedSchedules(MissedSchedules.runEach())
                .metrics(registry, "loop-a")
                .onOutcome(outcomes::add)
                .build(),
            run -> ran.add(run.scheduledAt()))) {
      loop.start();
      await("three runs").atMost(Duration.ofSeconds(15)).until(() -> ran.size() >= 3);
    }

    List<Instant> snapshot = List.copyOf(ran);
    assertThat(snapshot).doesNotHaveDuplicates().isSorted();
    for (int i = 1; i < snapshot.size(); i++) {
      assertThat(snapshot.get(i)).isEqualTo(snapshot.get(i - 1).plusSeconds(1));
    }
    assertThat(outcomes).filteredOn(o -> o instanceof RunOutcome.Finished).hasSize(snapshot.size());
    assertThat(
            registry
                .get("nolock.schedule.claimed")
                .tags("component", "schedule", "name", "loop-a", "job", "loop")
                .counter()
                .count())
        .isEqualTo(snapshot.size());
    assertThat(registry.get("nolock.schedule.run").timer().count()).isEqualTo(snapshot.size());
  }

  /**
   * The outcome listener runs on the scheduler's loop, a background component: a checked exception
   * it throws is that listener call's failure, counted and logged, and the loop goes on running the
   * job and telling the listener of the next outcomes.
   */
  @Test
  void anOutcomeListenerThatThrowsACheckedExceptionIsCountedAndTheLoopGoesOn() {
    List<Instant> ran = new CopyOnWriteArrayList<>();
    List<RunOutcome> heard = new CopyOnWriteArrayList<>();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (ScheduledSingleton loop =
        ScheduledSingleton.plain(
            pool,
            ScheduleConfig.custom("failing-listener", EVERY_SECOND)
                .missedSchedules(MissedSchedules.runEach())
                .metrics(registry, "failing-listener")
                .onOutcome(
                    outcome -> {
                      heard.add(outcome);
                      throw new IOException("the dashboard is down");
                    })
                .build(),
            run -> ran.add(run.scheduledAt()))) {
      loop.start();
      await("three outcomes heard")
          .atMost(Duration.ofSeconds(15))
          .until(() -> heard.stream().filter(o -> o instanceof RunOutcome.Finished).count() >= 3);
    }

    assertThat(ran)
        .as("the job kept running after the listener threw")
        .hasSizeGreaterThanOrEqualTo(3);
    assertThat(
            registry
                .get("nolock.schedule.listener.failures")
                .tags(
                    "component", "schedule", "name", "failing-listener", "job", "failing-listener")
                .counter()
                .count())
        .as("every listener call failed, and each was counted")
        .isEqualTo(heard.size());
  }

  /**
   * The loop's close() interrupts a pass still running after the shutdown timeout; here the pass is
   * in the outcome listener, which waits (for a slow dashboard, say) and ends on the interrupt. The
   * interrupt is the loop thread's, not the listener's: the rest of that pass runs with the flag
   * set, so the listener told of the next outcome sees the shutdown too instead of waiting again.
   * The negative control is the plain catch-all: it cleared the flag, and the next call ran as if
   * no shutdown had come.
   */
  @Test
  void anInterruptThatEndsTheOutcomeListenerIsNotLost() throws Exception {
    Instant t0 = Instant.parse("2026-03-10T10:00:00Z");
    MutableClock clock = new MutableClock(t0.plusMillis(100)); // the instance starts at 10:00
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    List<RunOutcome> heard = new CopyOnWriteArrayList<>();
    List<Boolean> interruptedWhenTold = new CopyOnWriteArrayList<>();
    CountDownLatch waiting = new CountDownLatch(1);
    CountDownLatch dashboardAnswered = new CountDownLatch(1); // never: the shutdown comes first
    ScheduledSingleton loop =
        ScheduledSingleton.plain(
            pool,
            ScheduleConfig.custom("interrupted-listener", CronSchedule.unix("* * * * *"))
                .missedSchedules(MissedSchedules.skip())
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .shutdownTimeout(Duration.ZERO)
                .metrics(registry, "interrupted-listener")
                .onOutcome(
                    outcome -> {
                      interruptedWhenTold.add(Thread.currentThread().isInterrupted());
                      heard.add(outcome);
                      if (heard.size() == 1) {
                        waiting.countDown();
                        dashboardAnswered.await();
                      }
                    })
                .build(),
            run -> {});
    // 10:01 runs; then the fleet is down until just after 10:06: the loop's first pass reports
    // 10:02 to 10:05 missed, then runs 10:06, two outcomes for one delivery.
    clock.set(t0.plusSeconds(60).plusMillis(100));
    assertThat(loop.runDueNow()).singleElement().isInstanceOf(RunOutcome.Finished.class);
    clock.set(t0.plusSeconds(6 * 60).plusMillis(100));
    loop.start();
    assertThat(waiting.await(15, TimeUnit.SECONDS)).as("the listener waits").isTrue();

    loop.close();

    assertThat(heard)
        .as("the missed times, then the run of 10:06, told after the interrupt")
        .hasSize(2)
        .satisfies(
            h -> {
              assertThat(h.get(0)).isInstanceOf(RunOutcome.Missed.class);
              assertThat(h.get(1)).isInstanceOf(RunOutcome.Finished.class);
            });
    assertThat(interruptedWhenTold)
        .as("the listener was told of the next outcome with the loop's interrupt flag still set")
        .containsExactly(false, true);
    assertThat(
            registry
                .get("nolock.schedule.listener.failures")
                .tags(
                    "component",
                    "schedule",
                    "name",
                    "interrupted-listener",
                    "job",
                    "interrupted-listener")
                .counter()
                .count())
        .as("the interrupted call counted as the listener's failure, as before")
        .isEqualTo(1);
  }

  @Test
  void closeWaitsForTheRunningJobAndItsFinishCommits() throws Exception {
    CountDownLatch entered = new CountDownLatch(1);
    CountDownLatch release = new CountDownLatch(1);
    List<Instant> ran = new CopyOnWriteArrayList<>();
    ScheduledSingleton loop =
        ScheduledSingleton.plain(
                pool,
                ScheduleConfig.custom("graceful", EVERY_SECOND).build(),
                run -> {
                  ran.add(run.scheduledAt());
                  entered.countDown();
                  release.await();
                })
            .start();
    assertThat(entered.await(15, TimeUnit.SECONDS)).isTrue();

    CompletableFuture<Void> closing = CompletableFuture.runAsync(loop::close);
    await("close waits while the job runs")
        .during(Duration.ofSeconds(1))
        .atMost(Duration.ofSeconds(3))
        .until(() -> !closing.isDone());
    release.countDown();
    closing.get(15, TimeUnit.SECONDS);

    assertThat(ran).hasSize(1);
    assertThat(runs.at("graceful", ran.get(0)))
        .hasValueSatisfying(row -> assertThat(row.state()).isEqualTo("done"));
    assertThatThrownBy(loop::runDueNow)
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("closed");
    assertThatThrownBy(loop::start).isInstanceOf(IllegalStateException.class);
  }

  @Test
  void aJobThatOutlastsTheShutdownTimeoutIsInterruptedAndItsRunGivenBack() throws Exception {
    CountDownLatch entered = new CountDownLatch(1);
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    List<RunOutcome> outcomes = new CopyOnWriteArrayList<>();
    ScheduledSingleton loop =
        ScheduledSingleton.plain(
                pool,
                ScheduleConfig.custom("interrupted", EVERY_SECOND)
                    .shutdownTimeout(Duration.ofMillis(200))
                    .onOutcome(outcomes::add)
                    .build(),
                run -> {
                  ran.add(run);
                  entered.countDown();
                  new CountDownLatch(1).await(); // never released: only an interrupt ends it
                })
            .start();
    assertThat(entered.await(15, TimeUnit.SECONDS)).isTrue();

    loop.close();

    assertThat(outcomes)
        .singleElement()
        .isInstanceOfSatisfying(
            RunOutcome.Failed.class,
            f -> {
              assertThat(f.error()).isInstanceOf(InterruptedException.class);
              assertThat(f.willRetry()).isTrue();
            });
    assertThat(runs.at("interrupted", ran.get(0).scheduledAt()))
        .hasValueSatisfying(
            row -> {
              assertThat(row.state()).isEqualTo("running");
              assertThat(row.lastError()).contains("InterruptedException");
            });
  }

  /**
   * A plain job may throw a checked exception; the loop treats it as that attempt's failure ({@code
   * Failed}, the run given back), retries the run with the next attempt and goes on.
   */
  @Test
  void aPlainJobsCheckedExceptionFailsItsAttemptAndTheLoopGoesOn() {
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    List<RunOutcome> outcomes = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton loop =
        ScheduledSingleton.plain(
            pool,
            ScheduleConfig.custom("plain-checked", EVERY_SECOND).onOutcome(outcomes::add).build(),
            run -> {
              ran.add(run);
              if (ran.size() == 1) {
                throw new IOException("the report share is not mounted (test)");
              }
            })) {
      loop.start();
      await("the failed run retried and finished")
          .atMost(Duration.ofSeconds(30))
          .until(() -> outcomes.stream().anyMatch(o -> finishedRetryOf(o, ran.get(0))));
    }

    assertThat(outcomes)
        .as("the first attempt's outcome (a slow start may report missed times before it)")
        .filteredOn(o -> !(o instanceof RunOutcome.Missed))
        .first()
        .isInstanceOfSatisfying(
            RunOutcome.Failed.class,
            f -> {
              assertThat(f.run()).isEqualTo(ran.get(0));
              assertThat(f.error())
                  .isInstanceOf(IOException.class)
                  .hasMessage("the report share is not mounted (test)");
              assertThat(f.willRetry()).isTrue();
            });
    assertThat(runs.at("plain-checked", ran.get(0).scheduledAt()))
        .hasValueSatisfying(
            row -> {
              assertThat(row.state()).isEqualTo("done");
              assertThat(row.attempt()).isEqualTo(2);
            });
  }

  /**
   * A fenced job may throw a checked exception; its writes roll back, the loop reports the
   * attempt's failure, and the retry's writes are the ones that commit.
   */
  @Test
  void aFencedJobsCheckedExceptionRollsBackItsWritesAndTheLoopGoesOn() {
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    List<RunOutcome> outcomes = new CopyOnWriteArrayList<>();
    db.execute(
        "CREATE TABLE IF NOT EXISTS fenced_checked_writes (scheduled_at timestamptz NOT NULL,"
            + " attempt bigint NOT NULL)");
    try (ScheduledSingleton loop =
        ScheduledSingleton.fenced(
            pool,
            ScheduleConfig.custom("fenced-checked", EVERY_SECOND).onOutcome(outcomes::add).build(),
            (run, tx) -> {
              ran.add(run);
              tx.execute(
                  "INSERT INTO fenced_checked_writes VALUES (CAST(? AS timestamptz), ?)",
                  run.scheduledAt().atOffset(java.time.ZoneOffset.UTC),
                  run.attempt().value());
              if (ran.size() == 1) {
                throw new TimeoutException("the upstream feed did not answer (test)");
              }
            })) {
      loop.start();
      await("the failed run retried and finished")
          .atMost(Duration.ofSeconds(30))
          .until(() -> outcomes.stream().anyMatch(o -> finishedRetryOf(o, ran.get(0))));
    }

    assertThat(outcomes)
        .as("the first attempt's outcome (a slow start may report missed times before it)")
        .filteredOn(o -> !(o instanceof RunOutcome.Missed))
        .first()
        .isInstanceOfSatisfying(
            RunOutcome.Failed.class,
            f -> {
              assertThat(f.error()).isInstanceOf(TimeoutException.class);
              assertThat(f.willRetry()).isTrue();
            });
    assertThat(
            db.fetch(
                    "SELECT attempt FROM fenced_checked_writes WHERE scheduled_at = CAST(? AS"
                        + " timestamptz)",
                    ran.get(0).scheduledAt().atOffset(java.time.ZoneOffset.UTC))
                .getValues(0, Long.class))
        .as("the failed attempt's write rolled back; the retry's committed, once")
        .containsExactly(2L);
  }

  private static boolean finishedRetryOf(RunOutcome outcome, ScheduledRun failed) {
    return outcome instanceof RunOutcome.Finished f
        && f.run().scheduledAt().equals(failed.scheduledAt())
        && f.run().attempt().value() == failed.attempt().value() + 1;
  }

  @Test
  void passesThatFailOnTheDatabaseAreRetriedWithBackoffUntilItAnswers() {
    FailingDataSource flaky = new FailingDataSource(pool, 3);
    List<Instant> ran = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton loop =
        ScheduledSingleton.plain(
            flaky,
            ScheduleConfig.custom("flaky", EVERY_SECOND).lease(Duration.ofSeconds(3)).build(),
            run -> ran.add(run.scheduledAt()))) {
      loop.start();
      await("a run after the database came back")
          .atMost(Duration.ofSeconds(15))
          .until(() -> !ran.isEmpty());
    }

    assertThat(flaky.refused()).isEqualTo(3);
  }

  /** Refuses the first {@code failures} connections, as a database that is briefly down. */
  private static final class FailingDataSource implements DataSource {
    private final DataSource delegate;
    private final AtomicInteger failuresLeft;
    private final AtomicInteger refused = new AtomicInteger();

    FailingDataSource(DataSource delegate, int failures) {
      this.delegate = delegate;
      this.failuresLeft = new AtomicInteger(failures);
    }

    int refused() {
      return refused.get();
    }

    @Override
    public Connection getConnection() throws SQLException {
      if (failuresLeft.getAndDecrement() > 0) {
        refused.incrementAndGet();
        throw new SQLTransientConnectionException("database briefly down (test)");
      }
      return delegate.getConnection();
    }

    @Override
    public Connection getConnection(String username, String password) throws SQLException {
      return getConnection();
    }

    @Override
    public PrintWriter getLogWriter() throws SQLException {
      return delegate.getLogWriter();
    }

    @Override
    public void setLogWriter(PrintWriter out) throws SQLException {
      delegate.setLogWriter(out);
    }

    @Override
    public void setLoginTimeout(int seconds) throws SQLException {
      delegate.setLoginTimeout(seconds);
    }

    @Override
    public int getLoginTimeout() throws SQLException {
      return delegate.getLoginTimeout();
    }

    @Override
    public Logger getParentLogger() throws SQLFeatureNotSupportedException {
      throw new SQLFeatureNotSupportedException();
    }

    @Override
    public <T> T unwrap(Class<T> type) throws SQLException {
      throw new SQLException("not a wrapper");
    }

    @Override
    public boolean isWrapperFor(Class<?> type) {
      return false;
    }
  }
}
