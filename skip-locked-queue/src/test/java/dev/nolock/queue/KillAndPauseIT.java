package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.testkit.ChildJvm;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
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
        .createTableIfMissing();
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
    List<ChildJvm> workers = new ArrayList<>();
    try {
      for (int i = 1; i <= workerCount; i++) {
        workers.add(startWorker(queueName, ledger, "w" + i, mode, i == 2 ? gateAfter : -1));
      }
      for (ChildJvm w : workers) {
        w.awaitLine("READY", Duration.ofSeconds(90));
      }
      ChildJvm victim = workers.get(0);
      ChildJvm frozen = workers.get(1);
      Timeline timeline = new Timeline(started);
      timeline.add("%d workers ready, %d jobs queued", workerCount, jobCount);

      String[] handled = frozen.awaitLine("HANDLED", Duration.ofSeconds(90));
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
        victim.awaitExit(Duration.ofSeconds(30));
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

      frozen.send("GO"); // opens the gate: the completion goes out once it resumes
      frozen.signal("CONT");
      String[] late = frozen.awaitLine("LATE", Duration.ofSeconds(60));
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
      for (ChildJvm w : workers) {
        if (w == victim && killOne) {
          continue;
        }
        w.send("STOP");
        String[] stats = w.awaitLine("STATS", Duration.ofSeconds(60));
        if (w == frozen) {
          frozenStale = Long.parseLong(stats[2].substring("stale=".length()));
        }
        timeline.add("%s stopped: %s %s", w.name(), stats[1], stats[2]);
        w.awaitExit(Duration.ofSeconds(30));
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
      workers.forEach(ChildJvm::close);
    }
  }

  /** What the database and the workers look like, for a failure message. */
  private static String diagnosis(
      String queue, String ledger, long frozenJob, List<ChildJvm> workers, Timeline timeline) {
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
    for (ChildJvm w : workers) {
      List<String> lines = w.lines();
      out.append(w.name())
          .append(" alive=")
          .append(w.isAlive())
          .append(" last lines=")
          .append(lines.subList(Math.max(0, lines.size() - 10), lines.size()))
          .append('\n');
    }
    return out.toString();
  }

  private static long count(String sql, Object... bindings) {
    return ((Number) db.fetchValue(sql, bindings)).longValue();
  }

  /** Starts one worker JVM ({@link QueueWorkerMain}) called {@code name}. */
  private static ChildJvm startWorker(
      String queue, String ledger, String name, String mode, int gateAfter) throws IOException {
    return ChildJvm.start(
        name,
        Map.of("org.slf4j.simpleLogger.defaultLogLevel", "warn"),
        QueueWorkerMain.class,
        schema.jdbcUrl(),
        queue,
        ledger,
        name,
        mode,
        Integer.toString(gateAfter),
        Long.toString(LEASE.toMillis()),
        Integer.toString(CONCURRENCY),
        Integer.toString(BATCH));
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
