package dev.nolock.schedule;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Clock;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicBoolean;

/**
 * One instance of the fleet in {@link FleetPauseIT}: a {@link ScheduledSingleton} on a schedule of
 * every second, whose fenced job appends a row to a ledger that has no unique key on the scheduled
 * time.
 *
 * <p>Arguments: JDBC URL, job name, ledger table, instance name, {@code FENCED} or {@code
 * UNFENCED}, lease millis, clock offset millis (this instance's wall clock runs that far ahead).
 * {@code UNFENCED} (the negative control) builds the config with the package-private switch that
 * finishes runs by job and time alone, ignoring the attempt token.
 *
 * <p>Talks one line per event on stdout: {@code READY <owner>} once the loop runs; {@code OUTCOME
 * <type> <epoch-second> <attempt>} for every run outcome of the loop. On {@code ARM} (stdin) the
 * next run this instance claims is gated: after the job's ledger write, inside the run's
 * transaction and before the finish, it prints {@code WORKED <epoch-second> <attempt>} and blocks
 * on stdin until {@code GO} (the test freezes the process with SIGSTOP right there), then prints
 * {@code LATE <epoch-second> <attempt>} and returns, so the finish goes out late. On {@code STOP}:
 * closes the scheduler gracefully, prints {@code STATS claimed=<n> skipped=<n> missed=<n>
 * takenOver=<n> stale=<n> finished=<n>} and exits 0.
 */
public final class ScheduledInstanceMain {

  private ScheduledInstanceMain() {}

  public static void main(String[] args) throws Exception {
    PrintStream out =
        new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
    String url = args[0];
    String job = args[1];
    String ledger = args[2];
    String instance = args[3];
    boolean fenced = args[4].equals("FENCED");
    Duration lease = Duration.ofMillis(Long.parseLong(args[5]));
    Duration offset = Duration.ofMillis(Long.parseLong(args[6]));

    HikariConfig hikari = new HikariConfig();
    hikari.setJdbcUrl(url);
    hikari.setMaximumPoolSize(3);
    hikari.setPoolName("instance-" + instance);
    HikariDataSource pool = new HikariDataSource(hikari);

    CountDownLatch gate = new CountDownLatch(1);
    CountDownLatch stop = new CountDownLatch(1);
    AtomicBoolean armed = new AtomicBoolean();
    Thread stdin =
        new Thread(
            () -> {
              try (BufferedReader in =
                  new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                for (String line; (line = in.readLine()) != null; ) {
                  switch (line) {
                    case "ARM" -> armed.set(true);
                    case "GO" -> gate.countDown();
                    case "STOP" -> stop.countDown();
                    default -> out.println("ERROR unknown command " + line);
                  }
                }
              } catch (Exception e) {
                out.println("ERROR stdin " + e);
              }
            },
            "stdin");
    stdin.setDaemon(true);
    stdin.start();

    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    ScheduleConfig.Builder config =
        ScheduleConfig.custom(job, CronSchedule.quartz("* * * * * ?"))
            .lease(lease)
            .missedSchedules(MissedSchedules.runEach())
            .clock(Clock.offset(Clock.systemUTC(), offset))
            .owner(instance + "/" + ProcessHandle.current().pid())
            .metrics(registry, instance)
            .onOutcome(
                outcome ->
                    out.println(
                        "OUTCOME "
                            + outcome.getClass().getSimpleName()
                            + " "
                            + outcome.scheduledAt().getEpochSecond()
                            + " "
                            + attempt(outcome)));
    if (!fenced) {
      config.withoutAttemptCheckForNegativeControl();
    }
    FencedJob appendToLedger =
        (run, tx) -> {
          tx.execute(
              "INSERT INTO "
                  + ledger
                  + " (scheduled_at, attempt, instance) VALUES (CAST(? AS timestamptz), ?, ?)",
              OffsetDateTime.ofInstant(run.scheduledAt(), ZoneOffset.UTC),
              run.attempt().value(),
              instance);
          if (armed.compareAndSet(true, false)) {
            long second = run.scheduledAt().getEpochSecond();
            out.println("WORKED " + second + " " + run.attempt().value());
            gate.await(); // the test freezes this process here with SIGSTOP
            out.println("LATE " + second + " " + run.attempt().value());
          }
        };

    try (ScheduledSingleton scheduler =
        ScheduledSingleton.fenced(pool, config.build(), appendToLedger)) {
      scheduler.start();
      out.println("READY " + scheduler.identity());
      stop.await();
    } // graceful: waits for a running job
    out.println(
        "STATS claimed="
            + count(registry, "nolock.schedule.claimed")
            + " skipped="
            + count(registry, "nolock.schedule.skipped")
            + " missed="
            + count(registry, "nolock.schedule.missed")
            + " takenOver="
            + count(registry, "nolock.schedule.taken.over")
            + " stale="
            + count(registry, "nolock.schedule.stale.finishes")
            + " finished="
            + count(registry, "nolock.schedule.finished"));
    pool.close();
    System.exit(0);
  }

  private static long attempt(RunOutcome outcome) {
    if (outcome instanceof RunOutcome.Finished f) {
      return f.run().attempt().value();
    }
    if (outcome instanceof RunOutcome.StaleAttempt s) {
      return s.run().attempt().value();
    }
    if (outcome instanceof RunOutcome.Failed f) {
      return f.run().attempt().value();
    }
    return 0;
  }

  private static long count(SimpleMeterRegistry registry, String meter) {
    return (long) registry.get(meter).counter().count();
  }
}
