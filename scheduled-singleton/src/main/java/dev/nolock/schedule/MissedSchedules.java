package dev.nolock.schedule;

/**
 * What to do with scheduled times that passed while no instance claimed them: the fleet was down,
 * every instance was busy or paused, or a deploy took longer than the period.
 *
 * <p>Missed times are counted from the <b>last claimed run in the table</b>, never from an
 * instance's memory: a fleet that restarts after an outage catches up correctly, and an instance
 * that was paused does not believe the times it slept through were missed when others ran them. A
 * time is missed when it lies strictly between the last claimed run and the time due now. With no
 * run of the job in the table yet, the instance's start is the floor: a new job starts at its next
 * scheduled time and does not replay history.
 *
 * <ul>
 *   <li>{@link #skip()}: run only the latest due time; the earlier ones are recorded as missed.
 *   <li>{@link #runOnce()} (the default): one run, for the latest due time, stands for all the
 *       missed ones; the job sees the earliest it covers in {@link ScheduledRun#coversFrom()}. This
 *       is Quartz's "fire once now" and what a Kubernetes CronJob does with missed times.
 *   <li>{@link #runEach(int)}: each due time runs, oldest first, but at most {@code bound} of them,
 *       the latest ones; any older ones are recorded as missed.
 * </ul>
 *
 * <h2>Why the bound is at most {@value #MAX_RUN_EACH_BOUND}</h2>
 *
 * A Kubernetes CronJob controller counts the start times a CronJob missed since its last scheduled
 * time (or since {@code startingDeadlineSeconds} ago, when that is set). The Kubernetes
 * documentation states that with more than 100 missed schedules it does not start the job and logs
 * "Cannot determine if job needs to be started. Too many missed start time (&gt; 100)"; without a
 * starting deadline the count only grows, so the job is never scheduled again until someone
 * intervenes. (The newer controller, the default since Kubernetes 1.21, emits a {@code
 * TooManyMissedTimes} warning instead and runs the latest time; the threshold is the same.) The
 * threshold exists because enumerating a backlog of that size is itself the failure: an outage
 * replayed one run at a time becomes a storm of back-to-back runs. This policy never stops
 * scheduling; it caps the catch-up instead. The bound is validated to at most {@value
 * #MAX_RUN_EACH_BOUND}, and anything older than the bound is counted as missed (in the table's
 * {@code missed} column and the metrics), visible rather than silently dropped.
 *
 * <p>Immutable.
 */
public final class MissedSchedules {

  /** The bound of {@link #runEach()}. */
  public static final int DEFAULT_RUN_EACH_BOUND = 10;

  /** The largest bound {@link #runEach(int)} accepts: the Kubernetes CronJob threshold. */
  public static final int MAX_RUN_EACH_BOUND = 100;

  /** The kind of policy. */
  public enum Kind {
    SKIP,
    RUN_ONCE,
    RUN_EACH
  }

  private static final MissedSchedules SKIP = new MissedSchedules(Kind.SKIP, 1);
  private static final MissedSchedules RUN_ONCE = new MissedSchedules(Kind.RUN_ONCE, 1);

  private final Kind kind;
  private final int bound;

  private MissedSchedules(Kind kind, int bound) {
    this.kind = kind;
    this.bound = bound;
  }

  /** Run only the latest due time; earlier missed times are recorded, not run. */
  public static MissedSchedules skip() {
    return SKIP;
  }

  /** One run for the latest due time stands for every missed time before it. The default. */
  public static MissedSchedules runOnce() {
    return RUN_ONCE;
  }

  /** {@link #runEach(int)} with a bound of {@value #DEFAULT_RUN_EACH_BOUND}. */
  public static MissedSchedules runEach() {
    return runEach(DEFAULT_RUN_EACH_BOUND);
  }

  /**
   * Run each due time, oldest first, at most {@code bound} of them (the latest ones).
   *
   * @param bound 1 to {@value #MAX_RUN_EACH_BOUND}; it counts the time due now too
   */
  public static MissedSchedules runEach(int bound) {
    if (bound < 1) {
      throw new IllegalArgumentException(
          "runEach("
              + bound
              + "): the bound counts the runs of one catch-up, the due time"
              + " included, and must be at least 1. Use skip() to run only the latest time.");
    }
    if (bound > MAX_RUN_EACH_BOUND) {
      throw new IllegalArgumentException(
          "runEach("
              + bound
              + "): at most "
              + MAX_RUN_EACH_BOUND
              + " runs per catch-up. A Kubernetes"
              + " CronJob that misses more than 100 start times stops scheduling the job"
              + " altogether; a backlog that large is a sign to run once for all of them"
              + " (runOnce()) or to fix the schedule, not to replay it run by run.");
    }
    return new MissedSchedules(Kind.RUN_EACH, bound);
  }

  public Kind kind() {
    return kind;
  }

  /** How many due times one catch-up runs at most: 1 for skip and run-once. */
  public int bound() {
    return bound;
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof MissedSchedules other && kind == other.kind && bound == other.bound;
  }

  @Override
  public int hashCode() {
    return 31 * kind.hashCode() + bound;
  }

  @Override
  public String toString() {
    return kind == Kind.RUN_EACH
        ? "runEach(" + bound + ")"
        : kind == Kind.SKIP ? "skip()" : "runOnce()";
  }
}
