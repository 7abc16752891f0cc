package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.testkit.ChildJvm;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.io.IOException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jooq.DSLContext;
import org.jooq.Record;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The module's safety claim with real processes, real claims and the real wall clock: three
 * instances (child JVMs, {@code -Xmx128m}, {@link ScheduledInstanceMain}) run a job every second;
 * every scheduled time takes effect exactly once, even though one instance is frozen with SIGSTOP
 * across several runs while it holds a run it has already done the work of.
 *
 * <p>The freeze lands where a GC pause would hurt most: instance C is armed through stdin, so the
 * next run it claims blocks after the job's ledger write, inside the run's transaction, before the
 * finish; the test freezes C right there. C's renewals freeze with it, its lease (3 s) expires on
 * the database's clock, and A or B takes the run over with the next attempt and finishes it. After
 * at least five more scheduled times, C is resumed with SIGCONT: its finish goes out late and must
 * be refused, which rolls back its ledger write. C's wall clock runs 300 ms ahead of the others
 * (clock skew the design tolerates: a scheduled time is a point of the cron sequence, not a clock
 * reading), so C wakes first and the run it is armed for comes at once.
 *
 * <p>The ledger has <b>no</b> unique key on the scheduled time, so a duplicate effect would show.
 * The negative control runs the same freeze with the attempt-token check switched off (a
 * package-private switch, not public API) and must find the frozen time twice.
 */
@ExtendWith(PostgresExtension.class)
class FleetPauseIT {

  private static final Duration LEASE = Duration.ofSeconds(3);
  private static final Duration STARTUP = Duration.ofSeconds(90);
  private static final int RUNS_WHILE_FROZEN = 5;

  private static PostgresSchema schema;
  private static DSLContext db;
  private static Runs runs;

  @BeforeAll
  static void createTable(PostgresSchema s) {
    schema = s;
    db = s.dsl();
    runs = new Runs(db);
    ScheduledSingleton.plain(
            s.dataSource(),
            ScheduleConfig.custom("setup", CronSchedule.quartz("* * * * * ?")).build(),
            run -> {})
        .createTableIfMissing();
  }

  /** What one scenario left behind. */
  record Outcome(
      long frozenSecond,
      long frozenAttempt,
      long ledgerRows,
      long distinctTimes,
      long secondsSpanned,
      long timesInLedgerTwice,
      long frozenTimeRows,
      boolean frozenAttemptInLedger,
      long runsWhileFrozen,
      boolean lateFinishAttempted,
      String lateFinishOutcome,
      List<Runs.Row> runRows,
      Map<String, Map<String, Long>> stats,
      Duration elapsed) {

    long stat(String instance, String key) {
      return stats.get(instance).get(key);
    }
  }

  @Test
  void everySecondTakesEffectOnceWhileAFrozenInstancesLateFinishIsRefused() throws Exception {
    Outcome run = run("fleet-fenced", "ledger_fenced", "FENCED");

    assertThat(run.timesInLedgerTwice()).as("no scheduled time twice in the ledger").isZero();
    assertThat(run.ledgerRows())
        .as("every second from the first to the last exactly once")
        .isEqualTo(run.distinctTimes())
        .isEqualTo(run.secondsSpanned());
    assertThat(run.runsWhileFrozen())
        .as("the instance stayed frozen across several runs")
        .isGreaterThanOrEqualTo(RUNS_WHILE_FROZEN);
    assertThat(run.lateFinishAttempted()).as("the frozen instance's late finish went out").isTrue();
    assertThat(run.lateFinishOutcome()).as("and was refused").isEqualTo("StaleAttempt");
    assertThat(run.stat("c", "stale")).isGreaterThanOrEqualTo(1);
    assertThat(run.frozenAttemptInLedger())
        .as("the frozen attempt's ledger write was rolled back")
        .isFalse();
    assertThat(run.frozenTimeRows()).as("the frozen time ran once, by the takeover").isOne();
    assertThat(run.stat("a", "takenOver") + run.stat("b", "takenOver")).isGreaterThanOrEqualTo(1);
    assertThat(run.runRows()).allSatisfy(row -> assertThat(row.state()).isEqualTo("done"));
    assertThat(run.runRows()).hasSize((int) run.distinctTimes());
    assertThat(run.runRows())
        .as("run-each left no time missed")
        .allSatisfy(row -> assertThat(row.missed()).isZero());
    assertThat(
            run.runRows().stream()
                .filter(r -> r.scheduledAt().getEpochSecond() == run.frozenSecond())
                .findFirst()
                .orElseThrow()
                .attempt())
        .isGreaterThan(run.frozenAttempt());
  }

  @Test
  void withoutTheAttemptCheckTheFrozenInstancesLateFinishDuplicatesItsScheduledTime()
      throws Exception {
    Outcome run = run("fleet-unfenced", "ledger_unfenced", "UNFENCED");

    assertThat(run.lateFinishAttempted()).isTrue();
    assertThat(run.lateFinishOutcome()).as("the late finish was accepted").isEqualTo("Finished");
    assertThat(run.frozenAttemptInLedger()).isTrue();
    assertThat(run.frozenTimeRows()).as("the frozen time took effect twice").isEqualTo(2);
    assertThat(run.timesInLedgerTwice()).isGreaterThanOrEqualTo(1);
    assertThat(run.ledgerRows()).isGreaterThan(run.distinctTimes());
  }

  private Outcome run(String job, String ledger, String mode) throws Exception {
    db.execute(
        "CREATE TABLE "
            + ledger
            + " (scheduled_at timestamptz NOT NULL, attempt bigint NOT NULL,"
            + " instance text NOT NULL, written_at timestamptz NOT NULL DEFAULT"
            + " clock_timestamp())"); // no unique key on scheduled_at
    long started = System.nanoTime();
    Timeline timeline = new Timeline(started);
    List<ChildJvm> fleet = new ArrayList<>();
    try {
      ChildJvm a = startInstance(job, ledger, "a", mode, 0);
      fleet.add(a);
      ChildJvm b = startInstance(job, ledger, "b", mode, 0);
      fleet.add(b);
      ChildJvm c = startInstance(job, ledger, "c", mode, 300);
      fleet.add(c);
      for (ChildJvm instance : fleet) {
        instance.awaitLine("READY", STARTUP);
      }
      timeline.add("three instances ready");
      await("the fleet runs")
          .atMost(Duration.ofSeconds(30))
          .pollInterval(Duration.ofMillis(200))
          .until(() -> count("SELECT count(*) FROM " + ledger) >= 3);

      c.send("ARM");
      timeline.add("c armed: the next run it claims stops before its finish");
      String[] worked = c.awaitLine("WORKED", Duration.ofSeconds(30));
      long frozenSecond = Long.parseLong(worked[1]);
      long frozenAttempt = Long.parseLong(worked[2]);
      c.signal("STOP");
      c.awaitState('T');
      Instant frozenTime = Instant.ofEpochSecond(frozenSecond);
      timeline.add(
          "c claimed %s (attempt %d), wrote its ledger row uncommitted and was frozen"
              + " with SIGSTOP before its finish",
          frozenTime, frozenAttempt);

      await("the frozen run is taken over and finished")
          .atMost(Duration.ofSeconds(30))
          .pollInterval(Duration.ofMillis(100))
          .until(
              () ->
                  runs.at(job, frozenTime)
                      .filter(r -> r.state().equals("done") && r.attempt() > frozenAttempt)
                      .isPresent());
      Runs.Row takenOver = runs.at(job, frozenTime).orElseThrow();
      timeline.add(
          "%s taken over by %s with attempt %d and finished",
          frozenTime, takenOver.owner(), takenOver.attempt());
      await("several runs while c is frozen")
          .atMost(Duration.ofSeconds(30))
          .pollInterval(Duration.ofMillis(200))
          .until(() -> laterTimes(ledger, frozenSecond) >= RUNS_WHILE_FROZEN);
      long runsWhileFrozen = laterTimes(ledger, frozenSecond);
      timeline.add("%d later times ran while c was frozen", runsWhileFrozen);

      c.send("GO"); // opens the gate: the finish goes out once it resumes
      c.signal("CONT");
      String[] late = c.awaitLine("LATE", Duration.ofSeconds(30));
      boolean lateFinishAttempted = Long.parseLong(late[1]) == frozenSecond;
      String[] outcome =
          c.awaitLine(
              line -> line.startsWith("OUTCOME ") && line.contains(" " + frozenSecond + " "),
              "OUTCOME " + frozenSecond,
              Duration.ofSeconds(30));
      timeline.add(
          "c resumed with SIGCONT; its late finish of attempt %d: %s", frozenAttempt, outcome[1]);
      long lastBefore = maxSecond(ledger);
      await("the whole fleet runs again")
          .atMost(Duration.ofSeconds(30))
          .pollInterval(Duration.ofMillis(200))
          .until(() -> maxSecond(ledger) >= lastBefore + 3);

      Map<String, Map<String, Long>> stats = new HashMap<>();
      for (ChildJvm instance : fleet) {
        instance.send("STOP");
      }
      for (ChildJvm instance : fleet) {
        String[] line = instance.awaitLine("STATS", Duration.ofSeconds(60));
        Map<String, Long> values = new HashMap<>();
        for (int i = 1; i < line.length; i++) {
          String[] kv = line[i].split("=");
          values.put(kv[0], Long.parseLong(kv[1]));
        }
        stats.put(instance.name(), values);
        instance.awaitExit(Duration.ofSeconds(30));
        timeline.add("%s stopped: %s", instance.name(), values);
      }

      Record span =
          db.fetchOne(
              "SELECT count(*), count(DISTINCT scheduled_at),"
                  + " extract(epoch FROM max(scheduled_at) - min(scheduled_at))::bigint + 1"
                  + " FROM "
                  + ledger);
      Outcome result =
          new Outcome(
              frozenSecond,
              frozenAttempt,
              span.get(0, Long.class),
              span.get(1, Long.class),
              span.get(2, Long.class),
              count(
                  "SELECT count(*) FROM (SELECT scheduled_at FROM "
                      + ledger
                      + " GROUP BY scheduled_at HAVING count(*) > 1) d"),
              count(
                  "SELECT count(*) FROM " + ledger + " WHERE scheduled_at = to_timestamp(?)",
                  frozenSecond),
              count(
                      "SELECT count(*) FROM "
                          + ledger
                          + " WHERE scheduled_at = to_timestamp(?) AND attempt = ?",
                      frozenSecond,
                      frozenAttempt)
                  > 0,
              runsWhileFrozen,
              lateFinishAttempted,
              outcome[1],
              runs.of(job),
              stats,
              Duration.ofNanos(System.nanoTime() - started));
      StringBuilder ledgerText = new StringBuilder("  ledger (time instance#attempt):");
      db.resultQuery(
              "SELECT to_char(scheduled_at AT TIME ZONE 'UTC', 'MI:SS') || ' ' || instance || '#'"
                  + " || attempt FROM "
                  + ledger
                  + " ORDER BY scheduled_at, written_at")
          .fetch(0, String.class)
          .forEach(entry -> ledgerText.append(' ').append(entry));
      System.out.println(
          "Fleet run \""
              + job
              + "\" ("
              + mode
              + "):\n"
              + timeline
              + ledgerText
              + "\n"
              + "  ledger rows="
              + result.ledgerRows()
              + " distinct times="
              + result.distinctTimes()
              + " seconds spanned="
              + result.secondsSpanned()
              + " times twice="
              + result.timesInLedgerTwice()
              + " elapsed="
              + result.elapsed());
      return result;
    } finally {
      fleet.forEach(ChildJvm::close);
    }
  }

  private static long laterTimes(String ledger, long second) {
    return count(
        "SELECT count(DISTINCT scheduled_at) FROM "
            + ledger
            + " WHERE scheduled_at > to_timestamp(?)",
        second);
  }

  private static long maxSecond(String ledger) {
    return count(
        "SELECT coalesce(extract(epoch FROM max(scheduled_at))::bigint, 0) FROM " + ledger);
  }

  private static long count(String sql, Object... bindings) {
    return ((Number) db.fetchValue(sql, bindings)).longValue();
  }

  /** Starts one instance JVM ({@link ScheduledInstanceMain}) called {@code name}. */
  private static ChildJvm startInstance(
      String job, String ledger, String name, String mode, long offsetMillis) throws IOException {
    return ChildJvm.start(
        name,
        Map.of("org.slf4j.simpleLogger.defaultLogLevel", "warn"),
        ScheduledInstanceMain.class,
        schema.jdbcUrl(),
        job,
        ledger,
        name,
        mode,
        Long.toString(LEASE.toMillis()),
        Long.toString(offsetMillis));
  }

  /** Events with the seconds since the scenario started. */
  private static final class Timeline {
    private final long start;
    private final StringBuilder text = new StringBuilder();

    Timeline(long start) {
      this.start = start;
    }

    void add(String format, Object... args) {
      double seconds = (System.nanoTime() - start) / 1e9;
      text.append(String.format("  t=%6.1fs  ", seconds))
          .append(String.format(format, args))
          .append('\n');
    }

    @Override
    public String toString() {
      return text.toString();
    }
  }
}
