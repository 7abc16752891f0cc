package dev.nolock.spring.internal;

import dev.nolock.patterns.FencingToken;
import dev.nolock.schedule.CronSchedule;
import dev.nolock.schedule.FencedJob;
import dev.nolock.schedule.ScheduleConfig;
import dev.nolock.schedule.ScheduledRun;
import dev.nolock.schedule.ScheduledSingleton;
import dev.nolock.spring.FencedScheduled;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.time.DateTimeException;
import java.time.ZoneId;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.function.BiFunction;
import java.util.function.Supplier;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.context.SmartLifecycle;

/**
 * Finds the {@link FencedScheduled} methods and runs each through a fenced {@link
 * ScheduledSingleton}.
 *
 * <ol>
 *   <li>Once every singleton exists, each bean's class is searched for {@code @FencedScheduled}
 *       methods. Each is checked, failing start-up naming the bean and method: the cron expression
 *       and zone (placeholders resolved) parse, the name is free, the parameters are {@link
 *       ScheduledRun}, {@link FencingToken} or {@link DSLContext}, and neither the method nor its
 *       class is {@code @Transactional}. Settings under {@code nolock.schedule.jobs.<name>} must
 *       name a job that exists.
 *   <li>Each method becomes a {@link FencedJob} that calls it with the run's transaction bound as
 *       the thread's Spring transaction ({@link BoundTransactions}): its Spring data access commits
 *       only with the finish of its attempt.
 *   <li>{@link #start()} (after the refresh) creates the runs table when asked and starts the
 *       singletons; {@link #stop()} closes them: no new run starts, a running job gets its shutdown
 *       timeout (its lease renewed), then it is interrupted and given back.
 * </ol>
 */
public final class ScheduledJobs
    implements SmartInitializingSingleton, SmartLifecycle, BeanFactoryAware {

  private record Registration(String source, ScheduleConfig config, FencedJob job) {}

  private final DataSource dataSource;
  private final BiFunction<String, CronSchedule, ScheduleConfig> configs;
  private final Set<String> configuredJobs;
  private final boolean createTables;
  private final Map<String, Registration> registrations = new LinkedHashMap<>();
  private final List<ScheduledSingleton> singletons = new ArrayList<>();
  private ConfigurableListableBeanFactory beanFactory;
  private volatile boolean running;

  /**
   * @param dataSource the application's {@code DataSource}
   * @param configs a job's checked configuration from its name and schedule, failing naming the
   *     property
   * @param configuredJobs the names under {@code nolock.schedule.jobs}
   */
  public ScheduledJobs(
      DataSource dataSource,
      BiFunction<String, CronSchedule, ScheduleConfig> configs,
      Set<String> configuredJobs,
      boolean createTables) {
    this.dataSource = dataSource;
    this.configs = configs;
    this.configuredJobs = new LinkedHashSet<>(configuredJobs);
    this.createTables = createTables;
  }

  @Override
  public void setBeanFactory(BeanFactory beanFactory) {
    this.beanFactory = (ConfigurableListableBeanFactory) beanFactory;
  }

  @Override
  public void afterSingletonsInstantiated() {
    AnnotatedMethods.forEach(beanFactory, FencedScheduled.class, this::register);
    for (String job : configuredJobs) {
      if (!registrations.containsKey(job)) {
        throw new IllegalStateException(
            "nolock.schedule.jobs."
                + job
                + " names no @FencedScheduled job (jobs: "
                + registrations.keySet()
                + "): fix the name, or remove the settings.");
      }
    }
  }

  private void register(String beanName, Method method, FencedScheduled annotation) {
    String source = "bean '" + beanName + "', method " + method.toGenericString();
    String name = annotation.name();
    Registration earlier = registrations.get(name);
    if (earlier != null) {
      throw refused(
          source,
          "the job name \""
              + name
              + "\" is used already ("
              + earlier.source()
              + "): a name identifies one job's runs in the table; give one of them another.");
    }
    if (AnnotatedMethods.isTransactional(method)) {
      throw refused(
          source,
          "it is @Transactional (on the method or its class), so its writes would go to a"
              + " transaction of Spring's, apart from the run's, and commit even when the run was"
              + " taken over. Remove @Transactional: the method already runs in the run's own"
              + " transaction, which commits its writes only with the run's finish.");
    }
    if (Modifier.isPrivate(method.getModifiers())) {
      throw refused(
          source,
          "it is private: a proxy of the bean (@Transactional elsewhere on it, @Validated, ...)"
              + " would run it on the proxy, without the bean's state; make it package-private or"
              + " public.");
    }
    Class<?>[] parameters = method.getParameterTypes();
    Set<Class<?>> seen = new LinkedHashSet<>();
    for (Class<?> parameter : parameters) {
      if ((parameter != ScheduledRun.class
              && parameter != FencingToken.class
              && parameter != DSLContext.class)
          || !seen.add(parameter)) {
        throw refused(
            source,
            "its parameters may be ScheduledRun, FencingToken (the attempt) and DSLContext (the"
                + " run's transaction), each at most once; it has "
                + parameter.getName()
                + ".");
      }
    }
    CronSchedule schedule = schedule(source, annotation);
    ScheduleConfig config;
    try {
      config = configs.apply(name, schedule);
    } catch (IllegalArgumentException e) {
      throw refused(source, e.getMessage());
    }
    AnnotatedMethods.Call call = AnnotatedMethods.call(beanFactory, beanName, method);
    FencedJob job =
        (run, tx) ->
            BoundTransactions.call(
                dataSource, tx, () -> call.invoke(arguments(parameters, run, tx)));
    registrations.put(name, new Registration(source, config, job));
  }

  private CronSchedule schedule(String source, FencedScheduled annotation) {
    String cron;
    ZoneId zone;
    try {
      cron = beanFactory.resolveEmbeddedValue(annotation.cron());
      zone = ZoneId.of(beanFactory.resolveEmbeddedValue(annotation.zone()));
    } catch (IllegalArgumentException | DateTimeException e) {
      throw refused(source, e.getMessage());
    }
    if (cron == null || cron.isBlank()) {
      throw refused(source, "the cron expression is empty.");
    }
    try {
      return parse(cron, zone);
    } catch (IllegalArgumentException e) {
      throw refused(source, e.getMessage());
    }
  }

  /**
   * {@code cron} as a schedule in {@code zone}: crontab's five fields, or Spring's six (or Quartz's
   * six or seven) with seconds first.
   *
   * @throws IllegalArgumentException saying what is wrong with the expression
   */
  static CronSchedule parse(String cron, ZoneId zone) {
    String[] fields = cron.trim().split("\\s+");
    if (fields.length == 5) {
      return parsed(cron, () -> CronSchedule.unix(cron.trim()).inZone(zone));
    }
    if (fields.length == 6 || fields.length == 7) {
      if (fields[5].chars().anyMatch(Character::isDigit)) {
        // Spring counts days of the week from 1 = Monday (0 and 7 = Sunday), Quartz from
        // 1 = Sunday: a number would silently mean another day.
        throw new IllegalArgumentException(
            "the cron expression \""
                + cron
                + "\" numbers a day of the week, which Spring and Quartz count differently:"
                + " name it instead (MON, TUE, ..., SUN; MON-FRI).");
      }
      // Spring's form allows "*" in both day fields, or "*" in the one not used; Quartz wants
      // "?" in the one not used. The schedule is the same.
      if (fields[3].equals("*") && fields[5].equals("*")) {
        fields[5] = "?";
      } else if (fields[3].equals("*") && !fields[5].equals("?")) {
        fields[3] = "?";
      } else if (fields[5].equals("*") && !fields[3].equals("?")) {
        fields[5] = "?";
      }
    }
    return parsed(cron, () -> CronSchedule.quartz(String.join(" ", fields)).inZone(zone));
  }

  private static CronSchedule parsed(String cron, Supplier<CronSchedule> parse) {
    try {
      return parse.get();
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "the cron expression \""
              + cron
              + "\" does not parse ("
              + e.getMessage()
              + "): use six fields with seconds first, e.g. \"0 0 2 * * *\", or crontab's five.",
          e);
    }
  }

  private static Object[] arguments(Class<?>[] parameters, ScheduledRun run, DSLContext tx) {
    Object[] arguments = new Object[parameters.length];
    for (int i = 0; i < parameters.length; i++) {
      arguments[i] =
          parameters[i] == ScheduledRun.class
              ? run
              : parameters[i] == FencingToken.class ? run.attempt() : tx;
    }
    return arguments;
  }

  private static IllegalStateException refused(String source, String why) {
    return new IllegalStateException("@FencedScheduled on " + source + ": " + why);
  }

  /** The registered jobs' names, in the order found. */
  public Set<String> names() {
    return registrations.keySet();
  }

  @Override
  public void start() {
    try {
      for (Registration r : registrations.values()) {
        ScheduledSingleton singleton =
            ScheduledSingleton.fenced(OwnConnections.of(dataSource), r.config(), r.job());
        if (createTables) {
          singleton.createTableIfMissing();
        }
        singletons.add(singleton.start());
      }
    } catch (RuntimeException e) {
      closeAll();
      throw e;
    }
    running = true;
  }

  @Override
  public void stop() {
    closeAll();
    running = false;
  }

  private void closeAll() {
    // One after the other: each close waits at most its own shutdown timeout.
    List<ScheduledSingleton> closing = List.copyOf(singletons);
    singletons.clear();
    CloseAll.each(closing, ScheduledSingleton::close);
  }

  @Override
  public boolean isRunning() {
    return running;
  }

  @Override
  public int getPhase() {
    return NolockPhase.PHASE;
  }
}
