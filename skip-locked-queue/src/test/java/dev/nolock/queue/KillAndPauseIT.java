package dev.nolock.queue;

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
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.awaitility.core.ConditionTimeoutException;
import org.jooq.DSLContext;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The queue's safety claim under a crash and a pause, with worker processes: every job completes
 * exactly once in effect, none is lost, and a worker paused past its lease cannot complete late.
 *
 * <p>Each worker is a child JVM ({@link QueueWorkerMain}, {@code -Xmx128m}). One is killed with
 * {@code kill -9} mid-run; another is frozen with SIGSTOP after its handler has done the work for a
 * job and before the completion (it blocks on a stdin gate there, so the freeze lands exactly
 * between the two), kept frozen until its lease has expired and another worker has re-claimed and
 * completed that job, then resumed with SIGCONT so its completion goes out late. Every handler
 * appends to a ledger with <b>no</b> unique key on the job; the fenced handler writes its row in
 * the completion's transaction, conditional on the attempt token. The negative control runs the
 * same pause with the token check switched off and must find the job twice in the ledger.
 */
@ExtendWith(PostgresExtension.class)
class KillAndPauseIT {

  private static final Duration LEASE = Duration.ofSeconds(3);
  private static final int CONCURRENCY = 4;
  private static final int BATCH = 50;

  private static PostgresSchema schema;
  private static DSLContext db;
  private static JobRows rows;

  @BeforeAll
  static void createSchema(PostgresSchema s) {
    schema = s;
    db = s.dsl();
    JobQueue.create(s.dataSource(), QueueConfig.ofDefaults("setup"), PayloadCodec.utf8())
        .createSchemaIfMissing();
    rows = new JobRows(s.dsl(), QueueConfig.DEFAULT_TABLE);
  }

  /** What one run left behind. */
  record Outcome(
      int jobs,
      long done,
      long dead,
      long ledgerRows,
      long ledgerJobs,
      long jobsInLedgerTwice,
      long ledgerRowsOfStaleAttempts,
      long jobsClaimedMoreThanOnce,
      long frozenJob,
      long frozenAttempt,
      long frozenJobLedgerRows,
      boolean frozenAttemptInLedger,
      int lateCompletionsAttempted,
      long frozenWorkerStaleRefusals,
      long remainingWhenKilled,
      Duration elapsed) {}

  @Test
  void twentyThousandJobsSurviveAKillAndAPausePastTheLeaseEachInTheLedgerExactlyOnce()
      throws Exception {
    Outcome run = run("fenced", "ledger_fenced", 20_000, 4, true, "FENCED", 20);

    assertThat(run.done()).as("none lost").isEqualTo(20_000);
    assertThat(run.dead()).as("none dead").isZero();
    assertThat(run.ledgerRows()).as("exactly one ledger row per job").isEqualTo(20_000);
    assertThat(run.ledgerJobs()).isEqualTo(20_000);
    assertThat(run.jobsInLedgerTwice()).isZero();
    assertThat(run.ledgerRowsOfStaleAttempts())
        .as("every ledger row carries the attempt that completed the job")
        .isZero();
    assertThat(run.remainingWhenKilled()).as("the kill landed mid-run").isPositive();
    assertThat(run.jobsClaimedMoreThanOnce())
        .as("the killed and the frozen workers' jobs were re-claimed")
        .isPositive();
    assertThat(run.lateCompletionsAttempted())
        .as("the frozen worker's late completion was attempted")
        .isGreaterThanOrEqualTo(1);
    assertThat(run.frozenAttemptInLedger()).as("and refused").isFalse();
    assertThat(run.frozenJobLedgerRows()).isOne();
    assertThat(run.frozenWorkerStaleRefusals())
        .as("the refusals were counted by the frozen worker")
        .isGreaterThanOrEqualTo(run.lateCompletionsAttempted());
  }

  @Test
  void withoutTheAttemptTokenCheckTheFrozenWorkersLateCompletionDoublesItsJob() throws Exception {
    Outcome run = run("unfenced", "ledger_unfenced", 2_000, 2, false, "UNFENCED", 0);

    assertThat(run.lateCompletionsAttempted()).isGreaterThanOrEqualTo(1);
    assertThat(run.frozenAttemptInLedger()).as("the late completion was accepted").isTrue();
    assertThat(run.frozenJobLedgerRows()).as("the frozen job is in the ledger twice").isEqualTo(2);
    assertThat(run.jobsInLedgerTwice()).isGreaterThanOrEqualTo(1);
    assertThat(run.ledgerRows()).isGreaterThan(run.jobs());
  }

  private Outcome run(
      String queueName,
      String ledger,
      int jobCount,
      int workerCount,
      boolean killOne,
      String mode,
      int gateAfter)
      throws Exception {
    db.execute(
        "CREATE TABLE "
            + ledger
            + " (job_id bigint NOT NULL, attempt bigint NOT NULL,"
            + " worker text NOT NULL, work text NOT NULL,"
            + " at timestamptz NOT NULL DEFAULT clock_timestamp())"); // no unique key on job_id
    JobQueue<String> queue =
        JobQueue.create(
            schema.dataSource(),
            QueueConfig.custom(queueName).notifyOnEnqueue(false).build(),
            PayloadCodec.utf8());
    List<NewJob<String>> jobs = new ArrayList<>();
    for (int i = 0; i < jobCount; i++) {
      jobs.add(NewJob.of("job-" + i));
    }
    queue.enqueueAll(jobs);

    long started = System.nanoTime();
    List<Worker> workers = new ArrayList<>();
    try {
      for (int i = 1; i <= workerCount; i++) {
        workers.add(Worker.start(queueName, ledger, "w" + i, mode, i == 2 ? gateAfter : -1));
      }
      for (Worker w : workers) {
        w.expect("READY", Duration.ofSeconds(90));
      }
      Worker victim = workers.get(0);
      Worker frozen = workers.get(1);
      Timeline timeline = new Timeline(started);
      timeline.add("%d workers ready, %d jobs queued", workerCount, jobCount);

      String[] handled = frozen.expect("HANDLED", Duration.ofSeconds(90));
      long frozenJob = Long.parseLong(handled[1]);
      long frozenAttempt = Long.parseLong(handled[2]);
      frozen.signal("STOP");
      frozen.awaitState('T');
      timeline.add(
          "w2 did the work of job %d attempt %d and was frozen with SIGSTOP before"
              + " completing it",
          frozenJob, frozenAttempt);

      long remainingWhenKilled = -1;
      if (killOne) {
        await("w1 well into the run")
            .atMost(Duration.ofSeconds(90))
            .pollInterval(Duration.ofMillis(20))
            .until(() -> db.fetchCount(db.selectFrom(ledger).where("worker = 'w1'")) >= 200);
        victim.signal("KILL");
        assertThat(victim.process.waitFor(30, TimeUnit.SECONDS)).isTrue();
        remainingWhenKilled = jobCount - rows.count(queueName, JobState.DONE);
        timeline.add("w1 killed with SIGKILL, %d jobs not done yet", remainingWhenKilled);
      }

      try {
        await("job " + frozenJob + " re-claimed and completed by another worker")
            .atMost(Duration.ofSeconds(90))
            .pollInterval(Duration.ofMillis(50))
            .until(
                () -> {
                  JobRows.Row row = rows.get(frozenJob);
                  return row.state() == JobState.DONE && row.attempt() > frozenAttempt;
                });
      } catch (ConditionTimeoutException e) {
        throw new AssertionError(diagnosis(queueName, ledger, frozenJob, workers, timeline), e);
      }
      timeline.add(
          "job %d completed by attempt %d while w2 was frozen",
          frozenJob, rows.get(frozenJob).attempt());

      frozen.release();
      String[] late = frozen.expect("LATE", Duration.ofSeconds(60));
      assertThat(Long.parseLong(late[1])).isEqualTo(frozenJob);
      timeline.add("w2 resumed with SIGCONT; its completion of attempt %s goes out late", late[2]);

      try {
        await("every job done")
            .atMost(Duration.ofSeconds(150))
            .pollInterval(Duration.ofMillis(200))
            .until(
                () ->
                    rows.count(queueName, JobState.DONE) + rows.count(queueName, JobState.DEAD)
                        == jobCount);
      } catch (ConditionTimeoutException e) {
        throw new AssertionError(diagnosis(queueName, ledger, frozenJob, workers, timeline), e);
      }
      timeline.add("all %d jobs finished", jobCount);

      long frozenStale = -1;
      for (Worker w : workers) {
        if (w == victim && killOne) {
          continue;
        }
        w.stop();
        String[] stats = w.expect("STATS", Duration.ofSeconds(60));
        if (w == frozen) {
          frozenStale = Long.parseLong(stats[2].substring("stale=".length()));
        }
        timeline.add("%s stopped: %s %s", w.name, stats[1], stats[2]);
        assertThat(w.process.waitFor(30, TimeUnit.SECONDS)).isTrue();
      }
      Duration elapsed = Duration.ofNanos(System.nanoTime() - started);

      Outcome outcome =
          new Outcome(
              jobCount,
              rows.count(queueName, JobState.DONE),
              rows.count(queueName, JobState.DEAD),
              count("SELECT count(*) FROM " + ledger),
              count("SELECT count(DISTINCT job_id) FROM " + ledger),
              count(
                  "SELECT count(*) FROM (SELECT job_id FROM "
                      + ledger
                      + " GROUP BY job_id HAVING count(*) > 1) d"),
              count(
                  "SELECT count(*) FROM "
                      + ledger
                      + " l JOIN nolock_jobs j ON j.id ="
                      + " l.job_id WHERE l.attempt <> j.attempt"),
              count("SELECT count(*) FROM nolock_jobs WHERE queue = ? AND attempt > 1", queueName),
              frozenJob,
              frozenAttempt,
              count("SELECT count(*) FROM " + ledger + " WHERE job_id = ?", frozenJob),
              count(
                      "SELECT count(*) FROM " + ledger + " WHERE job_id = ? AND attempt = ?",
                      frozenJob,
                      frozenAttempt)
                  > 0,
              1,
              frozenStale,
              remainingWhenKilled,
              elapsed);
      System.out.println(
          "Kill/pause run \"" + queueName + "\" (" + mode + "):\n" + timeline + "  " + outcome);
      return outcome;
    } finally {
      workers.forEach(Worker::kill);
    }
  }

  /** What the database and the workers look like, for a failure message. */
  private static String diagnosis(
      String queue, String ledger, long frozenJob, List<Worker> workers, Timeline timeline) {
    StringBuilder out = new StringBuilder("Timeline:\n").append(timeline);
    out.append("frozen job: ").append(rows.find(frozenJob)).append('\n');
    out.append("db now: ").append(rows.dbNow()).append('\n');
    out.append("jobs by state: ")
        .append(
            db.fetch(
                    "SELECT state, count(*), max(attempt) FROM nolock_jobs WHERE queue = ? GROUP BY"
                        + " state",
                    queue)
                .formatCSV())
        .append('\n');
    out.append("ledger by worker: ")
        .append(
            db.fetch("SELECT worker, count(*) FROM " + ledger + " GROUP BY worker ORDER BY worker")
                .formatCSV())
        .append('\n');
    out.append("row locks on the frozen job: ")
        .append(
            db.fetch(
                    "SELECT l.pid, a.state, a.xact_start, left(a.query, 120) FROM pg_locks l JOIN"
                        + " pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'transactionid'"
                        + " AND l.granted AND a.state LIKE 'idle in transaction%'")
                .formatCSV())
        .append('\n');
    for (Worker w : workers) {
      out.append(w.name)
          .append(" alive=")
          .append(w.process.isAlive())
          .append(" unread lines=")
          .append(w.lines)
          .append('\n');
    }
    return out.toString();
  }

  private static long count(String sql, Object... bindings) {
    return ((Number) db.fetchValue(sql, bindings)).longValue();
  }

  /** One worker JVM and the lines it prints. */
  private static final class Worker {
    private final String name;
    private final Process process;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();

    private Worker(String name, Process process) {
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
                  lines.add("ERROR reading the worker's output: " + e);
                }
              },
              "worker-" + name + "-stdout");
      reader.setDaemon(true);
      reader.start();
    }

    static Worker start(String queue, String ledger, String name, String mode, int gateAfter)
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
      command.add(QueueWorkerMain.class.getName());
      command.add(schema.jdbcUrl());
      command.add(queue);
      command.add(ledger);
      command.add(name);
      command.add(mode);
      command.add(Integer.toString(gateAfter));
      command.add(Long.toString(LEASE.toMillis()));
      command.add(Integer.toString(CONCURRENCY));
      command.add(Integer.toString(BATCH));
      ProcessBuilder builder = new ProcessBuilder(command);
      builder.redirectError(ProcessBuilder.Redirect.INHERIT);
      return new Worker(name, builder.start());
    }

    /** The next line; it must start with {@code prefix}. */
    String[] expect(String prefix, Duration timeout) throws InterruptedException {
      String line = lines.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
      if (line == null) {
        throw new AssertionError(
            "Worker " + name + " printed nothing within " + timeout + "; expected " + prefix);
      }
      if (!line.startsWith(prefix)) {
        throw new AssertionError(
            "Worker " + name + " printed \"" + line + "\" where " + prefix + " was expected");
      }
      return line.split(" ");
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
      await("worker " + name + " in state " + state)
          .atMost(Duration.ofSeconds(10))
          .pollInterval(Duration.ofMillis(5))
          .until(
              () -> {
                String content = Files.readString(stat);
                return content.charAt(content.lastIndexOf(')') + 2) == state;
              });
    }

    /** Opens the gate and resumes the process: the completion goes out. */
    void release() throws IOException, InterruptedException {
      send("GO");
      signal("CONT");
    }

    void stop() throws IOException {
      send("STOP");
    }

    private void send(String line) throws IOException {
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

  /** Events with the seconds since the run started. */
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
