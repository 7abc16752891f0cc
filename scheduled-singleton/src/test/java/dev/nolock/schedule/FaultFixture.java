package dev.nolock.schedule;

import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.function.Predicate;
import org.jooq.DSLContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What the fault ITs of this package share: the runs table in the class's own schema, a ledger of
 * job effects with no unique key (it counts them), a fresh testkit {@link JdbcFaults} pool per
 * test, and the schedules and times the tests run at.
 */
@ExtendWith(PostgresExtension.class)
abstract class FaultFixture {

  static final CronSchedule DAILY_AT_3 = CronSchedule.unix("0 3 * * *");
  static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");
  static final Instant THREE_AM = Instant.parse("2026-03-10T03:00:00Z");
  static final Instant TEN = Instant.parse("2026-03-10T10:00:00Z");

  /** Ten minutes: a run left to its lease would not run again within the test. */
  static final Duration LEASE = Duration.ofMinutes(10);

  /**
   * The claim's {@code INSERT}; a fault on the {@code COMMIT} after it ({@link
   * JdbcFaults#onNextCommit(dev.nolock.testkit.FaultKind, Predicate)}) is one on the claim's
   * transaction.
   */
  static final Predicate<String> CLAIM = JdbcFaults.sqlContaining("insert into");

  /**
   * The fenced job's write, {@link #effect}: a fault on the {@code COMMIT} after it is one on the
   * job's transaction, which carries the finish.
   */
  static final Predicate<String> JOB_WRITE = JdbcFaults.sqlContaining("insert into effect_ledger");

  /** The class's schema. */
  PostgresSchema schema;

  /** The runs table, read for assertions. */
  Runs runs;

  /** The pool whose connections the test breaks; a new one for each test. */
  JdbcFaults faults;

  @BeforeAll
  static void createRunsTableAndEffectLedger(PostgresSchema s) {
    ScheduledSingleton.plain(
            s.dataSource(), ScheduleConfig.custom("setup", DAILY_AT_3).build(), r -> {})
        .createTableIfMissing();
    s.dsl()
        .execute(
            "CREATE TABLE effect_ledger (job text NOT NULL, scheduled_at timestamptz NOT NULL,"
                + " attempt bigint NOT NULL)"); // no unique key: it counts effects
  }

  @BeforeEach
  void openFaultPool(PostgresSchema s) {
    schema = s;
    runs = new Runs(s.dsl());
    faults = JdbcFaults.pool(s.jdbcUrl());
  }

  @AfterEach
  void closeFaultPool() {
    faults.close();
  }

  /** 10:00 plus {@code m} minutes. */
  static Instant minute(int m) {
    return TEN.plusSeconds(60L * m);
  }

  /** A job's effect: one ledger row for {@code run}'s attempt, written through {@code db}. */
  static void effect(ScheduledRun run, DSLContext db) {
    db.execute(
        "INSERT INTO effect_ledger (job, scheduled_at, attempt) VALUES (?, CAST(? AS timestamptz),"
            + " ?)",
        run.job(),
        OffsetDateTime.ofInstant(run.scheduledAt(), ZoneOffset.UTC),
        run.attempt().value());
  }

  /** The attempts of {@code job} that left an effect, in order, one per effect. */
  List<Long> effects(String job) {
    return schema
        .dsl()
        .resultQuery("SELECT attempt FROM effect_ledger WHERE job = ? ORDER BY attempt", job)
        .fetch(0, Long.class);
  }
}
