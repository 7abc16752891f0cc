package dev.nolock.schedule;

import com.cronutils.model.Cron;
import com.cronutils.model.CronType;
import com.cronutils.model.definition.CronDefinitionBuilder;
import com.cronutils.model.time.ExecutionTime;
import com.cronutils.parser.CronParser;
import io.vavr.control.Option;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.temporal.ChronoUnit;
import java.time.zone.ZoneOffsetTransition;
import java.time.zone.ZoneRules;
import java.util.Objects;
import java.util.Optional;

/**
 * When a job is due: a cron expression, parsed by cron-utils, evaluated in one time zone.
 *
 * <p>Two dialects, chosen by the factory:
 *
 * <ul>
 *   <li>{@link #unix(String)}: the five fields of crontab(5) ({@code minute hour day-of-month month
 *       day-of-week}), minute resolution, e.g. {@code "*&#47;15 * * * *"};
 *   <li>{@link #quartz(String)}: Quartz's six or seven fields with <em>seconds</em> first ({@code
 *       second minute hour day-of-month month day-of-week [year]}), where one of the two day fields
 *       must be {@code ?}, e.g. {@code "*&#47;5 * * * * ?"}.
 * </ul>
 *
 * <p>A scheduled time is an {@link Instant} with whole seconds: it is half of the identity of a run
 * ({@code (job, scheduled_at)}), so every instance of a fleet must compute the same instants. That
 * needs the same expression, dialect and zone on every instance; the default zone is UTC. In a zone
 * with daylight saving time, a local time that does not exist on the day the clocks spring forward
 * is not scheduled that day (cron-utils 9.2.1 skips it), and a local time that happens twice when
 * the clocks go back is scheduled once, at its first occurrence (cron-utils matches both; this
 * class steps over the second); prefer UTC when every day must have its run.
 *
 * <p>Immutable and thread-safe.
 */
public final class CronSchedule {

  /** The cron dialect of an expression. */
  public enum Dialect {
    /** crontab(5): five fields, minute resolution. */
    UNIX,
    /** Quartz: six or seven fields, seconds first, one day field {@code ?}. */
    QUARTZ
  }

  private static final CronParser UNIX_PARSER =
      new CronParser(CronDefinitionBuilder.instanceDefinitionFor(CronType.UNIX));
  private static final CronParser QUARTZ_PARSER =
      new CronParser(CronDefinitionBuilder.instanceDefinitionFor(CronType.QUARTZ));

  private final Dialect dialect;
  private final String expression;
  private final ZoneId zone;
  private final ExecutionTime executionTime;

  private CronSchedule(Dialect dialect, String expression, ZoneId zone) {
    this.dialect = dialect;
    this.expression = expression;
    this.zone = zone;
    this.executionTime = ExecutionTime.forCron(parse(dialect, expression));
  }

  /** A crontab(5) expression with five fields, in UTC; see {@link #inZone(ZoneId)}. */
  public static CronSchedule unix(String expression) {
    return new CronSchedule(Dialect.UNIX, expression, ZoneOffset.UTC);
  }

  /** A Quartz expression with seconds (six or seven fields), in UTC; see {@link #inZone}. */
  public static CronSchedule quartz(String expression) {
    return new CronSchedule(Dialect.QUARTZ, expression, ZoneOffset.UTC);
  }

  /** The same expression evaluated in {@code zone}; every instance of the fleet must use it. */
  public CronSchedule inZone(ZoneId zone) {
    if (zone == null) {
      throw new IllegalArgumentException(
          "inZone(null): pass the zone every instance evaluates the expression in, e.g."
              + " ZoneId.of(\"Europe/Berlin\"), or leave it out for UTC.");
    }
    return new CronSchedule(dialect, expression, zone);
  }

  public Dialect dialect() {
    return dialect;
  }

  public String expression() {
    return expression;
  }

  public ZoneId zone() {
    return zone;
  }

  /** The first scheduled time strictly after {@code instant}; empty when there is none. */
  public Option<Instant> nextAfter(Instant instant) {
    return Option.ofOptional(firstAfter(requireInstant("nextAfter", instant)));
  }

  private Optional<Instant> firstAfter(Instant instant) {
    // cron-utils carries sub-second parts into its answer; scheduled times are whole seconds.
    ZonedDateTime from = wholeSeconds(instant);
    while (true) {
      Optional<Instant> next = executionTime.nextExecution(from).map(CronSchedule::toInstant);
      if (next.isEmpty()) {
        return next;
      }
      Optional<ZoneOffsetTransition> overlap = repeatingOverlap(next.get());
      if (overlap.isEmpty()) {
        return next;
      }
      // A second occurrence (see repeatingOverlap): every second occurrence of this overlap lies
      // in [transition, transition + overlap length); ask again from the last second of it. If
      // cron-utils answers a time not after its argument, step one second so the loop ends.
      Instant lastRepeated =
          overlap.get().getInstant().plus(overlap.get().getDuration().negated()).minusSeconds(1);
      Instant asked = from.toInstant();
      from = (lastRepeated.isAfter(asked) ? lastRepeated : asked.plusSeconds(1)).atZone(zone);
    }
  }

  /**
   * The latest scheduled time at or before {@code instant}: the one that is due now. Empty when the
   * schedule has no time that early.
   */
  public Option<Instant> latestAtOrBefore(Instant instant) {
    requireInstant("latestAtOrBefore", instant);
    // lastExecution is strictly before its argument: ask just after this whole second.
    return Option.ofOptional(lastBefore(wholeSeconds(instant).plusSeconds(1)));
  }

  /** The latest scheduled time strictly before {@code instant}; empty when there is none. */
  public Option<Instant> latestBefore(Instant instant) {
    requireInstant("latestBefore", instant);
    Instant whole = instant.truncatedTo(ChronoUnit.SECONDS);
    ZonedDateTime from =
        whole.equals(instant) ? wholeSeconds(instant) : wholeSeconds(instant).plusSeconds(1);
    return Option.ofOptional(lastBefore(from));
  }

  private static Instant requireInstant(String method, Instant instant) {
    if (instant == null) {
      throw new IllegalArgumentException(
          method + "(null): pass the instant to search from, e.g. clock.instant().");
    }
    return instant;
  }

  /** The latest scheduled time strictly before {@code before}, second occurrences stepped over. */
  private Optional<Instant> lastBefore(ZonedDateTime before) {
    while (true) {
      Optional<Instant> last = executionTime.lastExecution(before).map(CronSchedule::toInstant);
      if (last.isEmpty()) {
        return last;
      }
      Optional<ZoneOffsetTransition> overlap = repeatingOverlap(last.get());
      if (overlap.isEmpty()) {
        return last;
      }
      // Every second occurrence of this overlap is at or after the transition: the answer is the
      // latest time before it (the first occurrences of the repeated local times among them).
      Instant transition = overlap.get().getInstant();
      Instant asked = before.toInstant();
      before = (transition.isBefore(asked) ? transition : asked.minusSeconds(1)).atZone(zone);
    }
  }

  /**
   * The overlap (clocks going back) in which {@code time} is the <em>second</em> occurrence of its
   * local time; empty when {@code time} is not one.
   *
   * <p>Why: cron-utils (9.2.1) evaluates the expression on local date-times, so both occurrences of
   * a local time that happens twice match: for {@code 0 30 2 * * ?} in Europe/Berlin on 2026-10-25,
   * {@code nextExecution} just after 00:30Z (02:30 CEST) answers 01:30Z (02:30 CET), and {@code
   * lastExecution} just after 01:30Z answers 01:30Z. Every instance would claim both, and the job
   * would run twice that night. A local time that happens twice is scheduled once, at its first
   * occurrence (the earlier offset), like cron(8) does for fixed times.
   */
  private Optional<ZoneOffsetTransition> repeatingOverlap(Instant time) {
    ZoneRules rules = zone.getRules();
    ZoneOffsetTransition transition = rules.getTransition(LocalDateTime.ofInstant(time, zone));
    return transition != null
            && transition.isOverlap()
            && rules.getOffset(time).equals(transition.getOffsetAfter())
        ? Optional.of(transition)
        : Optional.empty();
  }

  private ZonedDateTime wholeSeconds(Instant instant) {
    return instant.truncatedTo(ChronoUnit.SECONDS).atZone(zone);
  }

  private static Instant toInstant(ZonedDateTime time) {
    return time.toInstant().truncatedTo(ChronoUnit.SECONDS);
  }

  private static Cron parse(Dialect dialect, String expression) {
    if (expression == null || expression.isBlank()) {
      throw new IllegalArgumentException(
          "The cron expression is "
              + (expression == null ? "null" : "blank")
              + ": pass one such as "
              + example(dialect)
              + ".");
    }
    try {
      Cron cron = (dialect == Dialect.UNIX ? UNIX_PARSER : QUARTZ_PARSER).parse(expression);
      return cron.validate();
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "\""
              + expression
              + "\" is not a valid "
              + dialect
              + " cron expression ("
              + e.getMessage()
              + "). Use "
              + example(dialect)
              + (dialect == Dialect.UNIX
                  ? ", or CronSchedule.quartz(...) for six fields with seconds."
                  : ", or CronSchedule.unix(...) for five fields without seconds."),
          e);
    }
  }

  private static String example(Dialect dialect) {
    return dialect == Dialect.UNIX
        ? "\"*/15 * * * *\" (minute hour day-of-month month day-of-week)"
        : "\"0 */15 * * * ?\" (second minute hour day-of-month month day-of-week, one day field"
            + " '?')";
  }

  @Override
  public boolean equals(Object o) {
    return o instanceof CronSchedule other
        && dialect == other.dialect
        && expression.equals(other.expression)
        && zone.equals(other.zone);
  }

  @Override
  public int hashCode() {
    return Objects.hash(dialect, expression, zone);
  }

  @Override
  public String toString() {
    return "CronSchedule[" + dialect + " \"" + expression + "\" in " + zone + "]";
  }
}
