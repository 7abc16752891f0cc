package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
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
    assertThat(run.lateFinishOutcome()).as("and was refused").isEqualTo("StaleFinish");
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
    List<Instance> fleet = new ArrayList<>();
    try {
      Instance a = Instance.start(job, ledger, "a", mode, 0);
      Instance b = Instance.start(job, ledger, "b", mode, 0);
      Instance c = Instance.start(job, ledger, "c", mode, 300);
      fleet.addAll(List.of(a, b, c));
      for (Instance instance : fleet) {
        instance.expect("READY", STARTUP);
      }
      timeline.add("three instances ready");
      await("the fleet runs")
          .atMost(Duration.ofSeconds(30))
          .pollInterval(Duration.ofMillis(200))
          .until(() -> count("SELECT count(*) FROM " + ledger) >= 3);

      c.send("ARM");
      timeline.add("c armed: the next run it claims stops before its finish");
      String[] worked = c.expect("WORKED", Duration.ofSeconds(30));
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

      c.release();
      String[] late = c.expect("LATE", Duration.ofSeconds(30));
      boolean lateFinishAttempted = Long.parseLong(late[1]) == frozenSecond;
      String[] outcome =
          c.expect(
              "OUTCOME", line -> line.contains(" " + frozenSecond + " "), Duration.ofSeconds(30));
      timeline.add(
          "c resumed with SIGCONT; its late finish of attempt %d: %s", frozenAttempt, outcome[1]);
      long lastBefore = maxSecond(ledger);
      await("the whole fleet runs again")
          .atMost(Duration.ofSeconds(30))
          .pollInterval(Duration.ofMillis(200))
          .until(() -> maxSecond(ledger) >= lastBefore + 3);

      Map<String, Map<String, Long>> stats = new HashMap<>();
      for (Instance instance : fleet) {
        instance.send("STOP");
      }
      for (Instance instance : fleet) {
        String[] line = instance.expect("STATS", Duration.ofSeconds(60));
        Map<String, Long> values = new HashMap<>();
        for (int i = 1; i < line.length; i++) {
          String[] kv = line[i].split("=");
          values.put(kv[0], Long.parseLong(kv[1]));
        }
        stats.put(instance.name, values);
        assertThat(instance.process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        timeline.add("%s stopped: %s", instance.name, values);
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
      fleet.forEach(Instance::kill);
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

  /** One instance JVM and the lines it prints. */
  private static final class Instance {
    private final String name;
    private final Process process;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();

    private Instance(String name, Process process) {
      this.name = name;
      this.process = process;
      Thread reader =
          new Thread(
              () -> {
                try (BufferedReader out =
                    new BufferedReader(
                        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                  for (String line; (line = out.readLine()) != null; ) {
                    lines.add(line);
                  }
                } catch (IOException e) {
                  lines.add("ERROR reading the instance's output: " + e);
                }
              },
              "instance-" + name + "-stdout");
      reader.setDaemon(true);
      reader.start();
    }

    static Instance start(String job, String ledger, String name, String mode, long offsetMillis)
        throws IOException {
      List<String> command = new ArrayList<>();
      command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
      command.add("-Xmx128m");
      command.add("-XX:+UseSerialGC");
      command.add("-XX:TieredStopAtLevel=1");
      command.add("-Dorg.jooq.no-logo=true");
      command.add("-Dorg.jooq.no-tips=true");
      command.add("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn");
      command.add("-cp");
      command.add(System.getProperty("java.class.path"));
      command.add(ScheduledInstanceMain.class.getName());
      command.add(schema.jdbcUrl());
      command.add(job);
      command.add(ledger);
      command.add(name);
      command.add(mode);
      command.add(Long.toString(LEASE.toMillis()));
      command.add(Long.toString(offsetMillis));
      ProcessBuilder builder = new ProcessBuilder(command);
      builder.redirectError(ProcessBuilder.Redirect.INHERIT);
      return new Instance(name, builder.start());
    }

    String[] expect(String prefix, Duration timeout) throws InterruptedException {
      return expect(prefix, line -> true, timeout);
    }

    /**
     * The next line that starts with {@code prefix} and matches {@code filter}; other lines (run
     * outcomes, mostly) are passed over. An {@code ERROR} line fails at once.
     */
    String[] expect(String prefix, java.util.function.Predicate<String> filter, Duration timeout)
        throws InterruptedException {
      long deadline = System.nanoTime() + timeout.toNanos();
      while (true) {
        long left = deadline - System.nanoTime();
        String line = left > 0 ? lines.poll(left, TimeUnit.NANOSECONDS) : null;
        if (line == null) {
          throw new AssertionError(
              "Instance " + name + " printed no " + prefix + " line within " + timeout);
        }
        if (line.startsWith("ERROR")) {
          throw new AssertionError("Instance " + name + " printed \"" + line + "\"");
        }
        if (line.startsWith(prefix) && filter.test(line)) {
          return line.split(" ");
        }
      }
    }

    void signal(String signal) throws IOException, InterruptedException {
      Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(process.pid())).start();
      if (kill.waitFor() != 0) {
        throw new IllegalStateException("kill -" + signal + " " + process.pid() + " failed");
      }
    }

    /** Waits until the kernel reports the process in {@code state} ('T' = stopped). */
    void awaitState(char state) {
      Path stat = Path.of("/proc", Long.toString(process.pid()), "stat");
      await("instance " + name + " in state " + state)
          .atMost(Duration.ofSeconds(10))
          .pollInterval(Duration.ofMillis(5))
          .until(
              () -> {
                String content = Files.readString(stat);
                return content.charAt(content.lastIndexOf(')') + 2) == state;
              });
    }

    /** Opens the gate and resumes the process: the finish goes out. */
    void release() throws IOException, InterruptedException {
      send("GO");
      signal("CONT");
    }

    void send(String line) throws IOException {
      OutputStream in = process.getOutputStream();
      in.write((line + "\n").getBytes(StandardCharsets.UTF_8));
      in.flush();
    }

    void kill() {
      if (process.isAlive()) {
        process.destroyForcibly();
      }
    }
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
