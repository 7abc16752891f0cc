package example;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.schedule.CronSchedule;
import dev.nolock.schedule.FencedJob;
import dev.nolock.schedule.MissedSchedules;
import dev.nolock.schedule.RunOutcome;
import dev.nolock.schedule.ScheduleConfig;
import dev.nolock.schedule.ScheduledSingleton;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.time.ZoneOffset;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.postgresql.ds.PGSimpleDataSource;

/** Two instances run the same every-second job: each scheduled time takes effect once. */
public final class Main {

  public static void main(String[] args) throws Exception {
    String url = env("NOLOCK_PG_URL", "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
    String schema = "nolock_example_" + UUID.randomUUID().toString().replace("-", "");
    DataSource pool = freshSchema(url, schema); // use a pool (HikariCP) in an application
    DSLContext dsl = DSL.using(pool, SQLDialect.POSTGRES);
    dsl.execute(
        "CREATE TABLE invoice_batches (period_end timestamptz NOT NULL, attempt bigint NOT NULL)");

    List<RunOutcome> outcomes = new CopyOnWriteArrayList<>();
    CountDownLatch threeRuns = new CountDownLatch(3);
    // Every second for the demo; CronSchedule.unix("0 2 * * *") is 02:00 UTC every day.
    ScheduleConfig config =
        ScheduleConfig.custom("invoice-batch", CronSchedule.quartz("* * * * * ?"))
            .missedSchedules(MissedSchedules.runEach(10)) // every period must be invoiced
            .lease(Duration.ofSeconds(30)) // renewed every 10 s while the job runs
            .onOutcome(
                outcome -> { // or your logger
                  outcomes.add(outcome);
                  if (outcome instanceof RunOutcome.Finished) {
                    threeRuns.countDown();
                  }
                })
            .build();
    // Written in the transaction that finishes the run: it commits only while this attempt is
    // the run's current one, so an instance that was paused writes nothing.
    FencedJob invoice =
        (run, tx) ->
            tx.insertInto(table(name("invoice_batches")))
                .set(field(name("period_end")), run.scheduledAt().atOffset(ZoneOffset.UTC))
                .set(field(name("attempt")), run.attempt().value())
                .execute();

    // Every instance of the fleet runs the same code; here two in one process.
    try (ScheduledSingleton first = ScheduledSingleton.fenced(pool, config, invoice);
        ScheduledSingleton second = ScheduledSingleton.fenced(pool, config, invoice)) {
      first.createTableIfMissing();
      first.start();
      second.start();
      check(threeRuns.await(30, TimeUnit.SECONDS), "three runs did not finish in 30 s");
    } // close() waits for a running job, then stops the loop

    long finished = outcomes.stream().filter(o -> o instanceof RunOutcome.Finished).count();
    long lost = outcomes.stream().filter(o -> o instanceof RunOutcome.LostClaim).count();
    int rows = dsl.fetchCount(table(name("invoice_batches")));
    int periods =
        dsl.fetchCount(dsl.selectDistinct(field(name("period_end"))).from("invoice_batches"));
    System.out.println(finished + " runs finished, " + lost + " claims lost to the other instance");
    System.out.println(rows + " invoice batches written, for " + periods + " scheduled times");
    check(rows == finished, rows + " batches written for " + finished + " finished runs");
    check(periods == rows, "a scheduled time was invoiced twice");

    dsl.execute("DROP SCHEMA " + schema + " CASCADE");
    System.out.println("OK: each scheduled time ran once across the two instances");
  }

  /** A schema of this run's own, so that every run starts from empty tables. */
  private static DataSource freshSchema(String url, String schema) throws SQLException {
    try (Connection connection = DriverManager.getConnection(url)) {
      connection.createStatement().execute("CREATE SCHEMA " + schema);
    }
    PGSimpleDataSource dataSource = new PGSimpleDataSource();
    dataSource.setURL(url);
    dataSource.setCurrentSchema(schema);
    return dataSource;
  }

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isBlank() ? fallback : value;
  }

  private static void check(boolean ok, String failure) {
    if (!ok) {
      System.err.println("FAILED: " + failure);
      System.exit(1);
    }
  }
}
