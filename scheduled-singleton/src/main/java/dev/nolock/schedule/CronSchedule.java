package dev.nolock.schedule;

import com.cronutils.model.Cron;
import com.cronutils.model.CronType;
import com.cronutils.model.definition.CronDefinitionBuilder;
import com.cronutils.model.time.ExecutionTime;
import com.cronutils.parser.CronParser;
import java.time.Instant;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.time.ZonedDateTime;
import java.time.temporal.ChronoUnit;
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
 * with daylight saving time, cron-utils (9.2.1) skips a local time that does not exist on the day
 * the clocks spring forward, and runs a local time that happens twice once, at its first
 * occurrence; prefer UTC when every day must have its run.
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
    return new CronSchedule(dialect, expression, Objects.requireNonNull(zone, "zone"));
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
  public Optional<Instant> nextAfter(Instant instant) {
    Objects.requireNonNull(instant, "instant");
    // cron-utils carries sub-second parts into its answer; scheduled times are whole seconds.
    return executionTime.nextExecution(wholeSeconds(instant)).map(CronSchedule::toInstant);
  }

  /**
   * The latest scheduled time at or before {@code instant}: the one that is due now. Empty when the
   * schedule has no time that early.
   */
  public Optional<Instant> latestAtOrBefore(Instant instant) {
    Objects.requireNonNull(instant, "instant");
    // lastExecution is strictly before its argument: ask just after this whole second.
    return executionTime
        .lastExecution(wholeSeconds(instant).plusSeconds(1))
        .map(CronSchedule::toInstant);
  }

  /** The latest scheduled time strictly before {@code instant}; empty when there is none. */
  public Optional<Instant> latestBefore(Instant instant) {
    Objects.requireNonNull(instant, "instant");
    Instant whole = instant.truncatedTo(ChronoUnit.SECONDS);
    ZonedDateTime from =
        whole.equals(instant) ? wholeSeconds(instant) : wholeSeconds(instant).plusSeconds(1);
    return executionTime.lastExecution(from).map(CronSchedule::toInstant);
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
