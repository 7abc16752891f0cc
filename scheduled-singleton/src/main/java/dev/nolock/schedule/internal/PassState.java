package dev.nolock.schedule.internal;

import dev.nolock.schedule.RunOutcome;
import dev.nolock.schedule.ScheduledRun;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.TreeMap;

/**
 * What one instance remembers between passes of its job. Every field but {@link #closing} is
 * guarded by the {@link Engine}'s monitor: passes and scans of one instance run one at a time.
 */
final class PassState {

  /** Set once by {@link Loop#close()}; every part stops starting new work when it sees it. */
  volatile boolean closing;

  /**
   * The latest scheduled time this instance handled: claimed here or lost to another instance, or
   * due before the instance started with no run in the table.
   */
  Instant lastPlanned;

  /** The latest time the database refused as ahead of its clock: reported once, claimed again. */
  Instant refusedAhead;

  /**
   * After a pass whose claim was refused as ahead: how long until the database's clock reaches the
   * time, for the next wake.
   */
  Duration aheadRetry;

  /**
   * Claims, takeovers and finishes of this instance whose answer was lost, by scheduled time,
   * oldest first: the next pass or scan settles them before anything else.
   */
  final Map<Instant, Unknown> unknown = new TreeMap<>();

  /**
   * Outcomes of a pass or scan that threw after producing them, oldest first: reported by the next
   * pass or scan that returns, before its own.
   */
  final List<RunOutcome> unreported = new ArrayList<>();

  /** What a pass left unknown at one scheduled time. */
  sealed interface Unknown {
    Instant scheduledAt();
  }

  /**
   * A claim ({@code missed} is what its pass would have reported with it) or a takeover that threw:
   * it may have committed, granting {@code attempt} to this instance.
   */
  record UnknownGrant(
      Instant scheduledAt, long attempt, boolean claim, Optional<RunOutcome.Missed> missed)
      implements Unknown {}

  /** A finish of {@code run} whose answer was lost. */
  record UnknownFinish(ScheduledRun run) implements Unknown {
    @Override
    public Instant scheduledAt() {
      return run.scheduledAt();
    }
  }

  /** Takes the outcomes collected in {@link #unreported}, now that they are being reported. */
  List<RunOutcome> drainUnreported() {
    List<RunOutcome> outcomes = List.copyOf(unreported);
    unreported.clear();
    return outcomes;
  }
}
