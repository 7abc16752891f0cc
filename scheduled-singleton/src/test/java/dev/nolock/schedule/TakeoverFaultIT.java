package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.schedule.internal.RunTable;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;

/**
 * A takeover whose {@code UPDATE} met a dropped connection: applied with its answer lost, the next
 * pass recognises the run as this instance's own and runs it, instead of leaving it held by a lease
 * nobody uses; lost before PostgreSQL saw it, the next pass takes the run over again.
 */
class TakeoverFaultIT extends FaultFixture {

  private static final Predicate<String> TAKEOVER =
      JdbcFaults.sqlContaining("\"attempt\" = (\"attempt\" + 1)");

  @Test
  void aTakeoverThatLandedWhileItsAnswerWasLostRunsAtTheNextPassNotALeaseLater() {
    takeoverLost(FaultKind.ANSWER_LOST);
  }

  @Test
  void aTakeoverLostOnTheWayIsTakenOverAgainByTheNextPass() {
    takeoverLost(FaultKind.REQUEST_LOST);
  }

  private void takeoverLost(FaultKind kind) {
    String job = "takeover-" + kind;
    RunTable table = new RunTable(ScheduleConfig.DEFAULT_TABLE, Duration.ofSeconds(5));
    MutableClock clock = new MutableClock(THREE_AM.plusMillis(100));
    List<ScheduledRun> ran = new CopyOnWriteArrayList<>();
    try (ScheduledSingleton survivor =
        ScheduledSingleton.plain(
            faults.dataSource(),
            ScheduleConfig.custom(job, DAILY_AT_3)
                .clock(clock)
                .claimWindow(MutableClock.ANY_DATE)
                .lease(LEASE)
                .build(),
            ran::add)) {
      // What a crashed instance leaves behind: its claim, never finished, its lease run out.
      assertThat(
              table
                  .claim(
                      schema.dsl(),
                      job,
                      THREE_AM,
                      "dead#0",
                      LEASE,
                      MutableClock.ANY_DATE,
                      Duration.ZERO,
                      Optional.empty(),
                      THREE_AM,
                      0)
                  .granted())
          .isPresent();
      runs.expireLease(job, THREE_AM);
      InjectedFault fault = faults.onNextStatement(kind, TAKEOVER);

      assertThatThrownBy(survivor::runDueNow)
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("could not take over " + THREE_AM);
      fault.assertFired();

      assertThat(survivor.runDueNow())
          .as("%s: the pass after the unknown takeover runs the run, not a lease later", kind)
          .singleElement()
          .isInstanceOf(RunOutcome.Finished.class);
    }
    assertThat(ran)
        .as("%s: run once, by the survivor's takeover", kind)
        .singleElement()
        .satisfies(run -> assertThat(run.attempt().value()).isEqualTo(2));
    assertThat(runs.at(job, THREE_AM))
        .hasValueSatisfying(row -> assertThat(row.state()).isEqualTo("done"));
  }
}
