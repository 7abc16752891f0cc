package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;

/**
 * A pass that produced outcomes and then threw ({@link BackendUnavailableException} on a later
 * statement) must not lose them: the runs they report happened, and no later pass can find them
 * again. Each is returned by the next pass that returns (and so reaches the loop's listener). The
 * faults are testkit's {@link JdbcFaults}.
 */
class FailedPassOutcomesIT extends FaultFixture {

  /** The takeover scan's {@code SELECT ... ORDER BY scheduled_at LIMIT ?} (no other has it). */
  private static final Predicate<String> EXPIRED_SCAN = JdbcFaults.sqlContaining("order by");

  /**
   * A pass settles an unknown finish (the {@code COMMIT} had landed) and then fails on its takeover
   * scan: the settled {@code Finished} was only in that pass's result, which the exception
   * discarded, and no later pass finds the finish unknown again.
   */
  @Test
  void aSettledFinishIsReportedEvenWhenThePassThatSettledItFailsLater() {
    String job = "settled-then-failed";
    MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    List<RunOutcome> heard = new ArrayList<>();
    try (ScheduledSingleton instance =
        ScheduledSingleton.fenced(
            faults.dataSource(),
            ScheduleConfig.custom(job, DAILY_AT_3)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .lease(LEASE)
                .build(),
            FaultFixture::effect)) {
      clock.set(THREE_AM.plusMillis(100));
      InjectedFault lostAnswer = faults.onNextCommit(FaultKind.ANSWER_LOST, JOB_WRITE);
      assertThatThrownBy(instance::runDueNow).isInstanceOf(BackendUnavailableException.class);
      lostAnswer.assertFired();

      // The next pass settles the finish, then its takeover scan meets a dropped connection.
      InjectedFault blip = faults.onNextStatement(FaultKind.REQUEST_LOST, EXPIRED_SCAN);
      assertThatThrownBy(instance::runDueNow)
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("could not find expired runs");
      blip.assertFired();

      heard.addAll(instance.runDueNow());
      heard.addAll(instance.runDueNow());
    }
    assertThat(effects(job)).as("the commit had landed").containsExactly(1L);
    assertThat(heard)
        .as(
            "the finish whose COMMIT landed with its answer lost is reported Finished by a later"
                + " pass, although the pass that settled it failed afterwards")
        .singleElement()
        .isInstanceOfSatisfying(
            RunOutcome.Finished.class,
            finished -> assertThat(finished.run().attempt().value()).isEqualTo(1));
  }

  /**
   * A catch-up runs 10:02 and then its claim of 10:03 meets a dropped connection: the pass throws,
   * and 10:02's {@code Finished} went with it.
   */
  @Test
  void aRunFinishedEarlierInAPassIsReportedWhenALaterClaimOfThatPassFails() {
    String job = "finished-then-claim-failed";
    MutableClock clock = new MutableClock(TEN.plusMillis(100));
    List<InjectedFault> armed = new CopyOnWriteArrayList<>();
    List<RunOutcome> heard = new ArrayList<>();
    try (ScheduledSingleton instance =
        ScheduledSingleton.fenced(
            faults.dataSource(),
            ScheduleConfig.custom(job, EVERY_MINUTE)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .missedSchedules(MissedSchedules.runEach(10))
                .build(),
            (run, tx) -> {
              effect(run, tx);
              if (run.scheduledAt().equals(minute(2)) && armed.isEmpty()) {
                armed.add(faults.onNextStatement(FaultKind.REQUEST_LOST, CLAIM));
              }
            })) {
      clock.set(minute(1).plusMillis(100));
      assertThat(instance.runDueNow()).singleElement().isInstanceOf(RunOutcome.Finished.class);

      clock.set(minute(3).plusMillis(100));
      assertThatThrownBy(instance::runDueNow)
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("could not claim " + minute(3));
      assertThat(armed).singleElement().satisfies(InjectedFault::assertFired);

      heard.addAll(instance.runDueNow());
    }
    assertThat(effects(job)).as("10:01, 10:02 and 10:03 ran once each").hasSize(3);
    assertThat(heard)
        .as(
            "10:02, finished by the pass whose next claim failed, is reported by the next pass,"
                + " before 10:03")
        .extracting(RunOutcome::scheduledAt)
        .containsExactly(minute(2), minute(3));
    assertThat(heard).allMatch(outcome -> outcome instanceof RunOutcome.Finished);
  }

  /** The loop's listener hears such an outcome too, once the loop's retry of the pass returns. */
  @Test
  void theLoopsListenerHearsARunFinishedByAPassThatFailedLater() {
    String job = "loop-finished-then-claim-failed";
    MutableClock clock = new MutableClock(TEN.plusMillis(100));
    List<InjectedFault> armed = new CopyOnWriteArrayList<>();
    List<RunOutcome> heard = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton loop =
        ScheduledSingleton.fenced(
            faults.dataSource(),
            ScheduleConfig.custom(job, EVERY_MINUTE)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .missedSchedules(MissedSchedules.runEach(10))
                .onOutcome(heard::add)
                .build(),
            (run, tx) -> {
              effect(run, tx);
              if (run.scheduledAt().equals(minute(2)) && armed.isEmpty()) {
                armed.add(faults.onNextStatement(FaultKind.REQUEST_LOST, CLAIM));
              }
            })) {
      clock.set(minute(1).plusMillis(100));
      assertThat(loop.runDueNow()).singleElement().isInstanceOf(RunOutcome.Finished.class);

      // The loop's first pass runs 10:02, fails on the claim of 10:03, and is retried.
      clock.set(minute(3).plusMillis(100));
      loop.start();
      await("the loop's retry runs 10:03")
          .atMost(Duration.ofSeconds(20))
          .until(() -> heard.stream().anyMatch(o -> o.scheduledAt().equals(minute(3))));
    }
    assertThat(armed).singleElement().satisfies(InjectedFault::assertFired);
    assertThat(heard)
        .as("the listener hears 10:02, finished by the pass that failed, then 10:03")
        .extracting(RunOutcome::scheduledAt)
        .containsExactly(minute(2), minute(3));
  }
}
