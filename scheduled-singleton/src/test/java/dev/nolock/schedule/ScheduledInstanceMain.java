package dev.nolock.schedule;

import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.testkit.ChildChannel;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Clock;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;

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
 * <p>Speaks the {@link ChildChannel} protocol. Events: {@code READY <owner>} once the loop runs;
 * {@code OUTCOME <type> <epoch-second> <attempt>} for every run outcome of the loop. After {@code
 * ARM} the next run this instance claims is gated: after the job's ledger write, inside the run's
 * transaction and before the finish, it reports {@code WORKED <epoch-second> <attempt>} and waits
 * at the gate for {@code GO} (the test freezes the process with SIGSTOP right there), then reports
 * {@code LATE <epoch-second> <attempt>} and returns, so the finish goes out late. On {@code STOP}:
 * closes the scheduler gracefully, reports {@code STATS claimed=<n> skipped=<n> missed=<n>
 * takenOver=<n> stale=<n> finished=<n>} and exits 0.
 */
public final class ScheduledInstanceMain {

  private ScheduledInstanceMain() {}

  public static void main(String[] args) throws Exception {
    String url = args[0];
    String job = args[1];
    String ledger = args[2];
    String instance = args[3];
    boolean fenced = args[4].equals("FENCED");
    Duration lease = Duration.ofMillis(Long.parseLong(args[5]));
    Duration offset = Duration.ofMillis(Long.parseLong(args[6]));

    ChildChannel channel = ChildChannel.open();
    HikariDataSource pool = ChildChannel.pool(url, 3, "instance-" + instance);

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
                    channel.report(
                        "OUTCOME",
                        outcome.getClass().getSimpleName(),
                        outcome.scheduledAt().getEpochSecond(),
                        attempt(outcome)));
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
          if (channel.takeArm()) {
            long second = run.scheduledAt().getEpochSecond();
            channel.report("WORKED", second, run.attempt().value());
            channel.gate(); // the test freezes this process here with SIGSTOP
            channel.report("LATE", second, run.attempt().value());
          }
        };

    try (ScheduledSingleton scheduler =
        ScheduledSingleton.fenced(pool, config.build(), appendToLedger)) {
      scheduler.start();
      channel.report("READY", scheduler.identity());
      channel.awaitStop();
    } // graceful: waits for a running job
    channel.report(
        "STATS",
        "claimed=" + count(registry, "nolock.schedule.claimed"),
        "skipped=" + count(registry, "nolock.schedule.skipped"),
        "missed=" + count(registry, "nolock.schedule.missed"),
        "takenOver=" + count(registry, "nolock.schedule.taken.over"),
        "stale=" + count(registry, "nolock.schedule.stale.finishes"),
        "finished=" + count(registry, "nolock.schedule.finished"));
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
