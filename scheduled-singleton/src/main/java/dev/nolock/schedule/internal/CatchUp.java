package dev.nolock.schedule.internal;

import dev.nolock.schedule.CronSchedule;
import dev.nolock.schedule.MissedSchedules;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * Which scheduled times one pass claims, given the latest time due now and the floor below which
 * nothing is considered (the latest claimed run in the table, or the instance's start when the
 * table has no run of the job). Pure computation on the schedule; no I/O.
 *
 * <p>The candidates are the times {@code t} with {@code floor < t <= due}. The one due now always
 * runs; the earlier ones were missed and are handled by the {@link MissedSchedules} policy. Work is
 * bounded: the latest {@code bound - 1} missed times are found walking back from {@code due}, and
 * the missed ones are counted walking forward from {@code floor} up to {@code countCap}.
 */
public final class CatchUp {

  private CatchUp() {}

  /**
   * One time to claim, oldest first.
   *
   * @param scheduledAt the time to claim
   * @param coversFrom the earliest time the run stands for
   * @param missedBefore the missed times recorded on this run (only on the first slot)
   */
  public record Slot(Instant scheduledAt, Instant coversFrom, long missedBefore) {}

  /**
   * The plan of one pass.
   *
   * @param slots the times to claim, oldest first; never empty
   * @param missed how many earlier times are not run (at most {@code countCap})
   * @param firstMissed the earliest of them, when {@code missed > 0}
   */
  public record Plan(List<Slot> slots, long missed, Optional<Instant> firstMissed) {}

  /**
   * @param floor exclusive: times at or before it are never candidates
   * @param due the latest scheduled time at or before now; after {@code floor}
   * @param countCap where counting missed times stops
   */
  public static Plan plan(
      CronSchedule schedule, MissedSchedules policy, Instant floor, Instant due, int countCap) {
    Objects.requireNonNull(schedule, "schedule");
    Objects.requireNonNull(policy, "policy");
    if (!due.isAfter(floor)) {
      throw new IllegalArgumentException("due " + due + " must be after the floor " + floor);
    }
    int earlierToRun = policy.kind() == MissedSchedules.Kind.RUN_EACH ? policy.bound() - 1 : 0;
    // Walk back from due: the missed times that will run (RUN_EACH), plus one to learn whether
    // any earlier time exists at all.
    List<Instant> latest = new ArrayList<>();
    boolean more = false;
    Instant cursor = due;
    while (true) {
      Optional<Instant> before = schedule.latestBefore(cursor);
      if (before.isEmpty() || !before.get().isAfter(floor)) {
        break;
      }
      if (latest.size() == earlierToRun) {
        more = true;
        break;
      }
      latest.add(before.get());
      cursor = before.get();
    }
    Collections.reverse(latest);
    long missed =
        more ? countMissed(schedule, floor, latest.isEmpty() ? due : latest.get(0), countCap) : 0;
    Optional<Instant> firstMissed = missed > 0 ? schedule.nextAfter(floor) : Optional.empty();

    List<Slot> slots = new ArrayList<>();
    switch (policy.kind()) {
      case SKIP -> slots.add(new Slot(due, due, missed));
      case RUN_ONCE -> slots.add(new Slot(due, firstMissed.orElse(due), missed));
      case RUN_EACH -> {
        List<Instant> times = new ArrayList<>(latest);
        times.add(due);
        for (int i = 0; i < times.size(); i++) {
          slots.add(new Slot(times.get(i), times.get(i), i == 0 ? missed : 0));
        }
      }
    }
    return new Plan(List.copyOf(slots), missed, firstMissed);
  }

  /**
   * How old the oldest time of a full catch-up can be, measured around {@code at}: just before the
   * next scheduled time after {@code at} comes due, a pass claims up to {@code policy.bound()}
   * times ending with the latest one before it, so its oldest slot is that far back from the next
   * time. Zero when the schedule has no time after {@code at}.
   *
   * <ol>
   *   <li>{@code next} = the first scheduled time after {@code at};
   *   <li>step back {@code bound} scheduled times from {@code next} (fewer if the schedule has no
   *       earlier ones);
   *   <li>the horizon is from there to {@code next}.
   * </ol>
   */
  public static Duration horizon(CronSchedule schedule, MissedSchedules policy, Instant at) {
    Optional<Instant> next = schedule.nextAfter(at);
    if (next.isEmpty()) {
      return Duration.ZERO;
    }
    Instant oldest = next.get();
    for (int i = 0; i < policy.bound(); i++) {
      Optional<Instant> before = schedule.latestBefore(oldest);
      if (before.isEmpty()) {
        break;
      }
      oldest = before.get();
    }
    return Duration.between(oldest, next.get());
  }

  /** The times {@code t} with {@code floor < t < before}, counted up to {@code cap}. */
  static long countMissed(CronSchedule schedule, Instant floor, Instant before, int cap) {
    long count = 0;
    Instant cursor = floor;
    while (count < cap) {
      Optional<Instant> next = schedule.nextAfter(cursor);
      if (next.isEmpty() || !next.get().isBefore(before)) {
        break;
      }
      count++;
      cursor = next.get();
    }
    return count;
  }
}
