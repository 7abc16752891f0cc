package dev.nolock.schedule.internal;

import dev.nolock.schedule.CronSchedule;
import dev.nolock.schedule.MissedSchedules;
import java.time.Duration;
import java.time.Instant;
import java.time.LocalDateTime;
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
      Optional<Instant> before = schedule.latestBefore(cursor).toJavaOptional();
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
    Optional<Instant> firstMissed =
        missed > 0 ? schedule.nextAfter(floor).toJavaOptional() : Optional.empty();

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

  /** The most scheduled times {@link #horizon} steps through. */
  public static final int HORIZON_STEPS = 500;

  /**
   * Where {@link #horizon} starts, as a local date and time in the schedule's zone: a fixed point,
   * so that the horizon never depends on when the application starts.
   */
  public static final LocalDateTime HORIZON_REFERENCE = LocalDateTime.of(2001, 1, 1, 0, 0);

  /**
   * How old the oldest time of a full catch-up can be, as far as a fixed sample of the schedule
   * shows: just before a scheduled time comes due, a pass claims up to {@code policy.bound()} times
   * ending with the latest one before it, so its oldest slot lies {@code bound} intervals back. The
   * result is the largest such span among the first {@value #HORIZON_STEPS} times of the schedule
   * from {@link #HORIZON_REFERENCE 2001-01-01T00:00} in its zone: the same whenever and wherever it
   * is computed, and cheap, but a lower bound. A schedule whose longest gaps come later than the
   * sample (an every-second job's nights and weekends) has a longer real horizon, which is why the
   * default claim window is at least 7 days. Zero when the schedule has fewer than two times.
   *
   * <ol>
   *   <li>Collect the scheduled times from {@link #HORIZON_REFERENCE} in the schedule's zone,
   *       forward, up to {@value #HORIZON_STEPS} of them;
   *   <li>for each time, the span from it to the time {@code bound} places later (or the last one
   *       collected);
   *   <li>the horizon is the largest span.
   * </ol>
   */
  public static Duration horizon(CronSchedule schedule, MissedSchedules policy) {
    Instant reference = HORIZON_REFERENCE.atZone(schedule.zone()).toInstant();
    List<Instant> times = new ArrayList<>();
    Optional<Instant> cursor = schedule.nextAfter(reference.minusSeconds(1)).toJavaOptional();
    while (cursor.isPresent() && times.size() < HORIZON_STEPS) {
      times.add(cursor.get());
      cursor = schedule.nextAfter(cursor.get()).toJavaOptional();
    }
    Duration horizon = Duration.ZERO;
    for (int i = 0; i + 1 < times.size(); i++) {
      Instant reach = times.get(Math.min(i + policy.bound(), times.size() - 1));
      Duration span = Duration.between(times.get(i), reach);
      if (span.compareTo(horizon) > 0) {
        horizon = span;
      }
    }
    return horizon;
  }

  /** The times {@code t} with {@code floor < t < before}, counted up to {@code cap}. */
  static long countMissed(CronSchedule schedule, Instant floor, Instant before, int cap) {
    long count = 0;
    Instant cursor = floor;
    while (count < cap) {
      Optional<Instant> next = schedule.nextAfter(cursor).toJavaOptional();
      if (next.isEmpty() || !next.get().isBefore(before)) {
        break;
      }
      count++;
      cursor = next.get();
    }
    return count;
  }
}
