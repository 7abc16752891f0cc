package dev.nolock.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Runs the annotated bean method at each time of {@link #cron()} once across every instance of the
 * application that shares the database: through a fenced {@link
 * dev.nolock.schedule.ScheduledSingleton}, started after the context is refreshed and closed before
 * the {@code DataSource} closes.
 *
 * <p>Guarantee: each scheduled time is claimed by one instance; a run whose instance died or froze
 * is taken over after its lease with a higher attempt, and the method's Spring data access ({@code
 * JdbcTemplate}, jOOQ through Spring, {@code NolockTransactions.current()}) runs in the run's own
 * transaction, which commits only together with the finish of the current attempt: at most one
 * attempt's writes commit per scheduled time, however long an instance was paused. Effects outside
 * the database are not fenced by this; pass the run's attempt token to them.
 *
 * <p>Parameters, each optional, in any order: {@link dev.nolock.schedule.ScheduledRun} (the
 * scheduled time and the attempt), {@link dev.nolock.patterns.FencingToken} (the attempt token),
 * {@link org.jooq.DSLContext} (jOOQ on the run's transaction). Throwing rolls the run's writes back
 * and gives the run back for a retry, up to {@code max-attempts}. The method must not be
 * {@code @Transactional}: its writes would then go to a second, unfenced transaction.
 *
 * <p>Settings per job under {@code nolock.schedule.jobs.<name>.*}. Start-up fails, naming the bean
 * and method, for an invalid cron expression or zone, a name used twice, a parameter of another
 * type, or {@code @Transactional}.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface FencedScheduled {

  /**
   * The job's name: with the scheduled time, the identity of a run in the runs table, so every
   * instance must use the same one, and no two methods may share it.
   */
  String name();

  /**
   * When the job is due: Spring's six fields with seconds first ({@code "0 0 2 * * *"}, 02:00
   * daily; Quartz's {@code ?} for one day field is accepted, as are seven fields with a year) or
   * crontab's five ({@code "0 2 * * *"}). {@code ${...}} placeholders are resolved from the
   * environment.
   */
  String cron();

  /**
   * The time zone the expression is evaluated in, the same on every instance; {@code ${...}}
   * placeholders are resolved. Default: UTC, which has no daylight-saving gaps or repeats.
   */
  String zone() default "UTC";
}
