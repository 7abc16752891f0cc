package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Instant;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The missed-schedules policies on a simulated wall clock and the real runs table: the clock jumps
 * over scheduled times (an outage of the whole fleet) and the next pass handles them per policy,
 * counting from the last claimed run in the table.
 */
@ExtendWith(PostgresExtension.class)
class MissedSchedulesIT {

  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");
  private static final Instant T0 = Instant.parse("2026-03-10T10:00:00Z");

  private static DataSource pool;
  private static Runs runs;

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    pool = schema.dataSource();
    runs = new Runs(schema.dsl());
    ScheduledSingleton.plain(
            pool, config("setup", MissedSchedules.skip(), clockAt(0)).build(), r -> {})
        .createTableIfMissing();
  }

  /** {@code n} minutes after T0, plus 100 ms: a pass that woke just after minute n. */
  private static MutableClock clockAt(int minute) {
    return new MutableClock(minute(minute).plusMillis(100));
  }

  private static Instant minute(int n) {
    return T0.plusSeconds(60L * n);
  }

  private static ScheduleConfig.Builder config(
      String job, MissedSchedules policy, MutableClock clock) {
    return ScheduleConfig.custom(job, EVERY_MINUTE)
        .missedSchedules(policy)
        .clock(clock)
        .claimWindow(MutableClock.ANY_DATE);
  }

  /** A fleet of one that ran minute 1, then was down until just after minute 6. */
  private record Outage(
      List<ScheduledRun> ran, List<RunOutcome> afterOutage, SimpleMeterRegistry registry) {}

  private static Outage outage(String job, MissedSchedules policy) {
    MutableClock clock = clockAt(0);
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            pool, config(job, policy, clock).metrics(registry, job).build(), ran::add)) {
      clock.set(minute(1).plusMillis(100));
      assertThat(instance.runDueNow()).singleElement().isInstanceOf(RunOutcome.Finished.class);
      clock.set(minute(6).plusMillis(100));
      return new Outage(ran, instance.runDueNow(), registry);
    }
  }

  private static double count(SimpleMeterRegistry registry, String meter) {
    return registry.get(meter).counter().count();
  }

  @Test
  void skipRunsOnlyTheLatestDueTimeAndRecordsTheEarlierOnesAsMissed() {
    Outage run = outage("skip", MissedSchedules.skip());

    assertThat(run.ran())
        .extracting(ScheduledRun::scheduledAt)
        .containsExactly(minute(1), minute(6));
    assertThat(run.afterOutage())
        .containsExactly(
            new RunOutcome.Missed(minute(6), minute(2), 4),
            new RunOutcome.Finished(run.ran().get(1)));
    assertThat(runs.of("skip"))
        .extracting(Runs.Row::scheduledAt, Runs.Row::missed, Runs.Row::coversFrom, Runs.Row::state)
        .containsExactly(
            org.assertj.core.groups.Tuple.tuple(minute(1), 0L, minute(1), "done"),
            org.assertj.core.groups.Tuple.tuple(minute(6), 4L, minute(6), "done"));
    assertThat(count(run.registry(), "nolock.schedule.missed")).isEqualTo(4);
    assertThat(count(run.registry(), "nolock.schedule.claimed")).isEqualTo(2);
  }

  @Test
  void runOnceRunsOneRunThatStandsForEveryMissedTime() {
    Outage run = outage("run-once", MissedSchedules.runOnce());

    ScheduledRun catchUp = run.ran().get(1);
    assertThat(run.ran()).hasSize(2);
    assertThat(catchUp.scheduledAt()).isEqualTo(minute(6));
    assertThat(catchUp.coversFrom()).isEqualTo(minute(2));
    assertThat(catchUp.missedBefore()).isEqualTo(4);
    assertThat(runs.at("run-once", minute(6)))
        .hasValueSatisfying(
            row -> {
              assertThat(row.coversFrom()).isEqualTo(minute(2));
              assertThat(row.missed()).isEqualTo(4);
            });
    assertThat(count(run.registry(), "nolock.schedule.missed")).isEqualTo(4);
  }

  @Test
  void runEachWithinItsBoundRunsEveryMissedTimeOldestFirst() {
    Outage run = outage("run-each", MissedSchedules.runEach(10));

    assertThat(run.ran())
        .extracting(ScheduledRun::scheduledAt)
        .containsExactly(minute(1), minute(2), minute(3), minute(4), minute(5), minute(6));
    assertThat(run.afterOutage()).hasSize(5).allMatch(o -> o instanceof RunOutcome.Finished);
    assertThat(runs.of("run-each")).hasSize(6).allMatch(r -> r.missed() == 0);
    assertThat(count(run.registry(), "nolock.schedule.missed")).isZero();
  }

  @Test
  void runEachBeyondItsBoundRunsTheLatestTimesAndCountsTheOlderOnesAsMissed() {
    Outage run = outage("run-each-bounded", MissedSchedules.runEach(3));

    assertThat(run.ran())
        .extracting(ScheduledRun::scheduledAt)
        .containsExactly(minute(1), minute(4), minute(5), minute(6));
    assertThat(run.afterOutage().get(0)).isEqualTo(new RunOutcome.Missed(minute(4), minute(2), 2));
    assertThat(runs.at("run-each-bounded", minute(4)))
        .hasValueSatisfying(row -> assertThat(row.missed()).isEqualTo(2));
    assertThat(count(run.registry(), "nolock.schedule.missed")).isEqualTo(2);
  }

  @Test
  void aFleetThatWasDownCatchesUpFromTheTableNotFromTheNewInstancesStart() {
    String job = "fleet-restart";
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    MutableClock before = clockAt(0);
    try (ScheduledSingleton old =
        ScheduledSingleton.plain(
            pool, config(job, MissedSchedules.runEach(), before).build(), ran::add)) {
      before.set(minute(1).plusMillis(100));
      old.runDueNow();
    }

    // The whole fleet was down; a new instance starts after minutes 2 to 6 have passed. Its own
    // start is later than all of them: only the table knows they were missed.
    MutableClock after = clockAt(6);
    try (ScheduledSingleton restarted =
        ScheduledSingleton.plain(
            pool, config(job, MissedSchedules.runEach(), after).build(), ran::add)) {
      restarted.runDueNow();
    }

    assertThat(ran)
        .extracting(ScheduledRun::scheduledAt)
        .containsExactly(minute(1), minute(2), minute(3), minute(4), minute(5), minute(6));
  }

  @Test
  void aNewJobStartsAtItsNextScheduledTimeWithoutReplayingTheTimesBeforeItsStart() {
    MutableClock clock = new MutableClock(minute(3).plusSeconds(30));
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton instance =
        ScheduledSingleton.plain(
            pool, config("brand-new", MissedSchedules.runEach(), clock).build(), ran::add)) {
      assertThat(instance.runDueNow()).isEmpty();
      clock.set(minute(4).plusMillis(100));
      instance.runDueNow();
    }

    assertThat(ran)
        .singleElement()
        .satisfies(
            run -> {
              assertThat(run.scheduledAt()).isEqualTo(minute(4));
              assertThat(run.missedBefore()).isZero();
            });
  }

  @Test
  void aTimeAnotherInstanceClaimedFirstIsALostClaimCountedAsSkipped() {
    MutableClock clock = clockAt(1);
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    SimpleMeterRegistry registryB = new SimpleMeterRegistry();
    try (ScheduledSingleton a =
            ScheduledSingleton.plain(
                pool, config("contended", MissedSchedules.skip(), clock).build(), ran::add);
        ScheduledSingleton b =
            ScheduledSingleton.plain(
                pool,
                config("contended", MissedSchedules.skip(), clock).metrics(registryB, "b").build(),
                ran::add)) {
      clock.set(minute(2).plusMillis(100));
      assertThat(a.runDueNow()).singleElement().isInstanceOf(RunOutcome.Finished.class);
      assertThat(b.runDueNow()).containsExactly(new RunOutcome.LostClaim(minute(2)));
      assertThat(b.runDueNow()).as("a time is handled once per instance").isEmpty();
    }

    assertThat(ran).hasSize(1);
    assertThat(count(registryB, "nolock.schedule.skipped")).isEqualTo(1);
    assertThat(count(registryB, "nolock.conflicts")).isEqualTo(1);
  }
}
