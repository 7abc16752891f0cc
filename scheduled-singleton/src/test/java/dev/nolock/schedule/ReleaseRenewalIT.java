package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A job that throws while its lease renewal is in flight: the renewal's {@code UPDATE} is held back
 * in the driver (a gate on the connection) after the renewal thread decided to send it, the job
 * throws, the run is released for a retry, and only then does the renewal reach PostgreSQL. It must
 * not extend the released lease: another instance's pass takes the run over at once. A second or so
 * per test (a 1.5 s lease, renewed every 0.5 s).
 */
@ExtendWith(PostgresExtension.class)
class ReleaseRenewalIT {

  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");
  private static final Duration LEASE = Duration.ofMillis(1500);
  private static final long WAIT_SECONDS = 30;

  private PostgresSchema schema;
  private Instant minute;
  private MutableClock clock;

  @BeforeAll
  static void createRunsTable(PostgresSchema s) {
    ScheduledSingleton.plain(
            s.dataSource(), ScheduleConfig.custom("setup", EVERY_MINUTE).build(), r -> {})
        .createTableIfMissing();
  }

  @BeforeEach
  void clockAgreesWithTheDatabase(PostgresSchema s) {
    schema = s;
    Instant dbNow =
        s.dsl()
            .resultQuery("SELECT clock_timestamp()")
            .fetchOne(0, OffsetDateTime.class)
            .toInstant();
    minute = EVERY_MINUTE.latestAtOrBefore(dbNow).get();
    clock = new MutableClock(minute.minusSeconds(1));
  }

  @Test
  void aRenewalThatLandsAfterTheReleaseOfAThrowingJobDoesNotExtendTheLease() throws Exception {
    Scenario s = throwWhileRenewalInFlight("released", config("released"));

    assertThat(s.leaseEnded)
        .as(
            "the renewal sent before the job threw and landing after the release must not extend"
                + " the released lease (A's pass: %s)",
            s.aOutcomes)
        .isTrue();
    assertThat(s.bOutcomes)
        .as("another instance retries the released run at once, with attempt 2")
        .singleElement()
        .isInstanceOfSatisfying(
            RunOutcome.Finished.class, f -> assertThat(f.run().attempt().value()).isEqualTo(2));
  }

  @Test
  void negativeControlARenewalMatchingTheRunningRunAloneExtendsTheReleasedLease() throws Exception {
    Scenario s =
        throwWhileRenewalInFlight(
            "released-control",
            config("released-control").withoutRenewalAttemptCheckForNegativeControl());

    assertThat(s.leaseEnded).as("the late renewal re-extended the released lease").isFalse();
    assertThat(s.bOutcomes)
        .as("the retry waits for the re-extended lease")
        .noneMatch(RunOutcome.Finished.class::isInstance);
  }

  @Test
  void aReleasedRunsLockedUntilIsAFiniteTimestampThatOrdinaryQueriesCanSubtract() {
    String job = "released-finite";
    try (ScheduledSingleton a =
        ScheduledSingleton.plain(
            schema.dataSource(),
            config(job).build(),
            run -> {
              throw new IllegalStateException("the job failed");
            })) {
      clock.set(minute.plusMillis(100));
      assertThat(a.runDueNow())
          .singleElement()
          .isInstanceOfSatisfying(RunOutcome.Failed.class, f -> assertThat(f.willRetry()).isTrue());
    }

    String where = " FROM nolock_scheduled_runs WHERE job = '" + job + "'";
    assertThat(
            schema
                .dsl()
                .resultQuery("SELECT isfinite(locked_until)" + where)
                .fetchOne(0, Boolean.class))
        .as(
            "the released marker is a finite timestamp (locked_until = %s)",
            schema.dsl().resultQuery("SELECT locked_until::text" + where).fetchOne(0, String.class))
        .isTrue();
    assertThat(
            schema
                .dsl()
                .resultQuery("SELECT clock_timestamp() - locked_until > interval '0'" + where)
                .fetchOne(0, Boolean.class))
        .as("an ordinary query subtracts it; it lies in the past")
        .isTrue();
    assertThat(
            schema
                .dsl()
                .resultQuery("SELECT locked_until" + where)
                .fetchOne(0, OffsetDateTime.class)
                .toInstant())
        .isEqualTo(Instant.EPOCH);
  }

  private record Scenario(
      List<RunOutcome> aOutcomes, boolean leaseEnded, List<RunOutcome> bOutcomes) {}

  private Scenario throwWhileRenewalInFlight(String job, ScheduleConfig.Builder aConfig)
      throws Exception {
    RenewalGate gate = new RenewalGate(schema.dataSource());
    List<RunOutcome> aOutcomes;
    try (ScheduledSingleton a =
            ScheduledSingleton.plain(
                gate.dataSource(),
                aConfig.build(),
                run -> {
                  assertThat(gate.arrived.await(WAIT_SECONDS, TimeUnit.SECONDS))
                      .as("a renewal reached the driver")
                      .isTrue();
                  throw new IllegalStateException("the job failed");
                });
        ScheduledSingleton b =
            ScheduledSingleton.plain(schema.dataSource(), config(job).build(), run -> {})) {
      clock.set(minute.plusMillis(100));
      aOutcomes = a.runDueNow();
      assertThat(aOutcomes)
          .singleElement()
          .isInstanceOfSatisfying(RunOutcome.Failed.class, f -> assertThat(f.willRetry()).isTrue());
      gate.go.countDown();
      assertThat(gate.done.await(WAIT_SECONDS, TimeUnit.SECONDS))
          .as("the held renewal was sent")
          .isTrue();
      boolean leaseEnded =
          schema
              .dsl()
              .resultQuery(
                  "SELECT locked_until <= clock_timestamp() FROM nolock_scheduled_runs WHERE job ="
                      + " ? AND scheduled_at = CAST(? AS timestamptz)",
                  job,
                  OffsetDateTime.ofInstant(minute, ZoneOffset.UTC))
              .fetchOne(0, Boolean.class);
      return new Scenario(aOutcomes, leaseEnded, b.runDueNow());
    }
  }

  private ScheduleConfig.Builder config(String job) {
    return ScheduleConfig.custom(job, EVERY_MINUTE).clock(clock).lease(LEASE);
  }

  /**
   * Holds the first renewal ({@code UPDATE ... SET locked_until} that is no claim, resume,
   * takeover, finish, release or failure) in the driver until {@link #go}: the renewal thread has
   * decided to renew, and its statement reaches PostgreSQL only when the test lets it.
   */
  private static final class RenewalGate {
    final CountDownLatch arrived = new CountDownLatch(1);
    final CountDownLatch go = new CountDownLatch(1);
    final CountDownLatch done = new CountDownLatch(1);
    private final AtomicBoolean taken = new AtomicBoolean();
    private final DataSource real;

    RenewalGate(DataSource real) {
      this.real = real;
    }

    DataSource dataSource() {
      return proxy(
          DataSource.class,
          (p, m, args) -> {
            Object result = call(real, m, args);
            return result instanceof Connection c ? connection(c) : result;
          });
    }

    private Connection connection(Connection c) {
      return proxy(
          Connection.class,
          (p, m, args) -> {
            Object result = call(c, m, args);
            if (m.getName().equals("prepareStatement")
                && args[0] instanceof String sql
                && isRenewal(sql)
                && taken.compareAndSet(false, true)) {
              return held((PreparedStatement) result);
            }
            return result;
          });
    }

    private PreparedStatement held(PreparedStatement statement) {
      return proxy(
          PreparedStatement.class,
          (p, m, args) -> {
            if (!m.getName().startsWith("execute")) {
              return call(statement, m, args);
            }
            arrived.countDown();
            assertThat(go.await(WAIT_SECONDS, TimeUnit.SECONDS)).isTrue();
            try {
              return call(statement, m, args);
            } finally {
              done.countDown();
            }
          });
    }

    private static boolean isRenewal(String sql) {
      String s = sql.toLowerCase(Locale.ROOT);
      return s.startsWith("update")
          && s.contains("\"locked_until\" =")
          && !s.contains("returning")
          && !s.contains("last_error")
          && !s.contains("finished_at");
    }

    private static Object call(Object target, Method m, Object[] args) throws Throwable {
      try {
        return m.invoke(target, args);
      } catch (InvocationTargetException e) {
        throw e.getCause();
      }
    }

    @SuppressWarnings("unchecked")
    private static <T> T proxy(Class<T> type, InvocationHandler handler) {
      return (T) Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, handler);
    }
  }
}
