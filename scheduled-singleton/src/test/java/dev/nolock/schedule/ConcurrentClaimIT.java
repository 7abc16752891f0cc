package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.UnaryOperator;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Claims of one job whose transactions overlap, with a claim's {@code COMMIT} held open on the
 * server ({@link HeldClaimCommit}) while another claim of the job is sent. Times are minutes just
 * before the database's clock. Under a second per test.
 */
@ExtendWith(PostgresExtension.class)
class ConcurrentClaimIT {

  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");

  private PostgresSchema schema;
  private Runs runs;

  /** The latest minute at or before the database's clock, and the two before it. */
  private Instant t2;

  private Instant t1;
  private Instant t0;

  private final List<ScheduledRun> ran = new CopyOnWriteArrayList<>();

  @BeforeAll
  static void createRunsTable(PostgresSchema s) {
    ScheduledSingleton.plain(
            s.dataSource(), ScheduleConfig.custom("setup", EVERY_MINUTE).build(), r -> {})
        .createTableIfMissing();
  }

  @BeforeEach
  void times(PostgresSchema s) {
    schema = s;
    runs = new Runs(s.dsl());
    Instant dbNow =
        s.dsl()
            .resultQuery("SELECT clock_timestamp()")
            .fetchOne(0, OffsetDateTime.class)
            .toInstant();
    t2 = EVERY_MINUTE.latestAtOrBefore(dbNow).get();
    t1 = t2.minusSeconds(60);
    t0 = t1.minusSeconds(60);
  }

  @Test
  void anOlderTimeIsSupersededByALaterClaimWhoseTransactionIsStillOpen() throws Exception {
    Overlap o = claimT1WhileT2sClaimIsOpen("serialised", c -> c);

    assertThat(o.bOutcomes)
        .as(
            "B's claim of %s must wait for A's open claim of %s (which covers %s) and be"
                + " refused; A ran %s",
            t1, t2, t1, ran)
        .containsExactly(new RunOutcome.Superseded(t1, t2));
    assertThat(runs.at("serialised", t1)).as("no row for %s", t1).isEmpty();
    assertThat(ran).extracting(ScheduledRun::scheduledAt).containsExactly(t2);
  }

  @Test
  void negativeControlWithoutTheClaimLockBothTimesAreInsertedAndT1IsBilledTwice() throws Exception {
    Overlap o =
        claimT1WhileT2sClaimIsOpen(
            "unserialised", ScheduleConfig.Builder::withoutClaimLockForNegativeControl);

    assertThat(o.bOutcomes).singleElement().isInstanceOf(RunOutcome.Finished.class);
    assertThat(runs.at("unserialised", t1)).isPresent();
    assertThat(runs.at("unserialised", t2)).isPresent();
    ScheduledRun a = ran.stream().filter(r -> r.scheduledAt().equals(t2)).findFirst().orElseThrow();
    assertThat(a.coversFrom()).as("A's run of %s covers %s, which B ran too", t2, t1).isEqualTo(t1);
  }

  private record Overlap(List<RunOutcome> aOutcomes, List<RunOutcome> bOutcomes) {}

  /**
   * The job ran {@code t0}. A (wall clock just after {@code t2}) claims {@code t2} covering {@code
   * t1}, and its {@code COMMIT} is held; meanwhile B (wall clock just after {@code t1}) claims
   * {@code t1}. A's commit is released once B waits for a lock or has returned.
   */
  private Overlap claimT1WhileT2sClaimIsOpen(
      String job, UnaryOperator<ScheduleConfig.Builder> control) throws Exception {
    seedDone(job, t0);
    HeldClaimCommit gate = new HeldClaimCommit(schema.jdbcUrl()).arm(HeldClaimCommit.Mode.HOLD);
    try (ScheduledSingleton a =
            ScheduledSingleton.plain(
                gate.dataSource(),
                control
                    .apply(
                        ScheduleConfig.custom(job, EVERY_MINUTE)
                            .clock(new MutableClock(t2.plusSeconds(1))))
                    .build(),
                ran::add);
        ScheduledSingleton b =
            ScheduledSingleton.plain(
                schema.dataSource(),
                control
                    .apply(
                        ScheduleConfig.custom(job, EVERY_MINUTE)
                            .clock(new MutableClock(t1.plusSeconds(1))))
                    .build(),
                ran::add)) {
      return passesWhileAClaimIsHeld(gate, a, b);
    }
  }

  /**
   * Runs a pass of {@code held}, whose claim's {@code COMMIT} {@code gate} holds, and once it is
   * held a pass of {@code other}; releases the commit once {@code other} waits for a lock or has
   * returned. Returns their outcomes, {@code held}'s first.
   */
  private Overlap passesWhileAClaimIsHeld(
      HeldClaimCommit gate, ScheduledSingleton held, ScheduledSingleton other) throws Exception {
    CompletableFuture<List<RunOutcome>> heldPass = CompletableFuture.supplyAsync(held::runDueNow);
    assertThat(gate.held.await(30, TimeUnit.SECONDS)).as("the claim reached its commit").isTrue();
    CompletableFuture<List<RunOutcome>> otherPass = CompletableFuture.supplyAsync(other::runDueNow);
    await("the other pass waits for a lock or has returned")
        .atMost(Duration.ofSeconds(30))
        .until(() -> otherPass.isDone() || lockWaiters(gate) > 0);
    gate.release();
    return new Overlap(heldPass.get(30, TimeUnit.SECONDS), otherPass.get(30, TimeUnit.SECONDS));
  }

  @Test
  void aLaterClaimPlannedBeforeAnOlderClaimCommittedDoesNotCoverTheOlderTimeAgain() {
    String job = "stale-plan";
    seedDone(job, t0);
    List<RunOutcome> bOutcomes = new ArrayList<>();
    try (ScheduledSingleton b =
            instance(schema.dataSource(), job, new MutableClock(t1.plusSeconds(1)), c -> c);
        ScheduledSingleton a =
            instance(
                beforeClaim(schema.dataSource(), () -> bOutcomes.addAll(b.runDueNow())),
                job,
                new MutableClock(t2.plusSeconds(1)),
                c -> c)) {
      // A read the floor (t0) and planned t2 covering t1; B claims and runs t1 before A's claim.
      List<RunOutcome> aOutcomes = a.runDueNow();

      assertThat(bOutcomes).singleElement().isInstanceOf(RunOutcome.Finished.class);
      ScheduledRun aRun =
          ran.stream().filter(r -> r.scheduledAt().equals(t2)).findFirst().orElseThrow();
      assertThat(aRun.coversFrom())
          .as(
              "B ran %s before A's claim of %s: A's run must not cover it again (A: %s, runs: %s)",
              t1, t2, aOutcomes, ran)
          .isAfter(t1);
      assertThat(ran).extracting(ScheduledRun::scheduledAt).containsExactly(t1, t2);
    }
  }

  /**
   * A fleet's first times, one instance waking late. A (made after {@code t1}, wall clock just
   * after {@code t2}) reads the floor while the job has no run: its plan is {@code t2} alone, as a
   * new job starts at its next time. Before A's claim, B (made before {@code t0}) claims and runs
   * {@code t0}. Claimed on that plan, {@code t2} would be the job's newest run with {@code t1}
   * neither run nor counted missed, and B's claim of {@code t1} refused as superseded: a time lost
   * and reported as handled. A's claim finds the run it did not plan with and plans again from it:
   * with {@code runEach()} it runs {@code t1} and then {@code t2}.
   */
  @Test
  @Timeout(60)
  void aRunCommittedBetweenAPlansFloorReadAndItsClaimMakesItPlanAgainSoNoTimeIsLost() {
    FirstTimes run = firstTimes("first-times-each", MissedSchedules.runEach());

    assertThat(ran)
        .as("every time from the job's first run on runs once (%s)", run)
        .extracting(ScheduledRun::scheduledAt)
        .containsExactlyInAnyOrder(t0, t1, t2);
    assertThat(run.a())
        .as("A planned again and ran both times, with none missed")
        .extracting(o -> o instanceof RunOutcome.Finished f ? f.run().scheduledAt() : o)
        .containsExactly(t1, t2);
    assertThat(run.b()).doesNotHaveAnyElementsOfTypes(RunOutcome.Superseded.class);
    assertThat(runs.of("first-times-each")).allSatisfy(row -> assertThat(row.missed()).isZero());
  }

  /**
   * The same with {@code runOnce()}: planned again from {@code t0}, A's run of {@code t2} stands
   * for {@code t1} too and counts it missed, and B's later claim of {@code t1} is superseded by a
   * run that did count it.
   */
  @Test
  @Timeout(60)
  void withRunOnceTheTimeBetweenIsCountedMissedByTheRunThatCoversIt() {
    FirstTimes run = firstTimes("first-times-once", MissedSchedules.runOnce());

    assertThat(ran).extracting(ScheduledRun::scheduledAt).containsExactlyInAnyOrder(t0, t2);
    ScheduledRun a = ran.stream().filter(r -> r.scheduledAt().equals(t2)).findFirst().orElseThrow();
    assertThat(a.coversFrom()).as("A's run stands for %s too (%s)", t1, run).isEqualTo(t1);
    assertThat(runs.at("first-times-once", t2).orElseThrow().missed()).isOne();
    assertThat(run.b()).contains(new RunOutcome.Superseded(t1, t2));
  }

  /**
   * The check is in the claim's locked statement, not in a read before the lock: B's claim of
   * {@code t0} is held at its {@code COMMIT} while A reads the floor (no run visible yet) and
   * claims {@code t2}. A's claim waits for the claim lock, then sees {@code t0} and plans again. A
   * check made before the lock would have seen nothing and lost {@code t1}.
   */
  @Test
  @Timeout(60)
  void aClaimThatWaitedForTheClaimLockSeesTheRunCommittedMeanwhileAndPlansAgain() throws Exception {
    String job = "first-times-held";
    UnaryOperator<ScheduleConfig.Builder> runEach =
        c -> c.missedSchedules(MissedSchedules.runEach());
    HeldClaimCommit gate = new HeldClaimCommit(schema.jdbcUrl()).arm(HeldClaimCommit.Mode.HOLD);
    MutableClock bClock = new MutableClock(t0.minusSeconds(1));
    MutableClock aClock = new MutableClock(t1.plusSeconds(30));
    try (ScheduledSingleton b = instance(gate.dataSource(), job, bClock, runEach);
        ScheduledSingleton a = instance(schema.dataSource(), job, aClock, runEach)) {
      bClock.set(t0.plusSeconds(1));
      aClock.set(t2.plusSeconds(1));
      // B's claim of t0 held open; A's claim of t2 waits for the claim lock it holds.
      Overlap passes = passesWhileAClaimIsHeld(gate, b, a);
      List<RunOutcome> aOutcomes = passes.bOutcomes();
      List<RunOutcome> bOutcomes = passes.aOutcomes();

      assertThat(ran)
          .as("A: %s, B: %s, rows: %s", aOutcomes, bOutcomes, runs.of(job))
          .extracting(ScheduledRun::scheduledAt)
          .containsExactlyInAnyOrder(t0, t1, t2);
      assertThat(aOutcomes)
          .extracting(o -> o instanceof RunOutcome.Finished f ? f.run().scheduledAt() : o)
          .containsExactly(t1, t2);
    }
  }

  private record FirstTimes(List<RunOutcome> a, List<RunOutcome> b, List<Runs.Row> rows) {}

  /**
   * B (made before {@code t0}) runs {@code t0} between A's floor read on an empty table and A's
   * claim of {@code t2} (A made after {@code t1}); then B's pass at {@code t1}.
   */
  private FirstTimes firstTimes(String job, MissedSchedules policy) {
    MutableClock bClock = new MutableClock(t0.minusSeconds(1));
    MutableClock aClock = new MutableClock(t1.plusSeconds(30));
    List<RunOutcome> bOutcomes = new ArrayList<>();
    UnaryOperator<ScheduleConfig.Builder> settings = c -> c.missedSchedules(policy);
    try (ScheduledSingleton b = instance(schema.dataSource(), job, bClock, settings);
        ScheduledSingleton a =
            instance(
                beforeClaim(schema.dataSource(), () -> bOutcomes.addAll(b.runDueNow())),
                job,
                aClock,
                settings)) {
      bClock.set(t0.plusSeconds(1));
      aClock.set(t2.plusSeconds(1));
      List<RunOutcome> aOutcomes = a.runDueNow();
      assertThat(bOutcomes)
          .as("B ran %s between A's floor read and A's claim", t0)
          .singleElement()
          .isInstanceOf(RunOutcome.Finished.class);

      bClock.set(t1.plusSeconds(1));
      bOutcomes.addAll(b.runDueNow());
      return new FirstTimes(aOutcomes, bOutcomes, runs.of(job));
    }
  }

  @Test
  void aReSentClaimWhoseFirstCommitWasStillInFlightRunsTheTimeOnce() throws Exception {
    String job = "in-flight";
    List<RunOutcome> outcomes = resendWhileFirstCommitInFlight(job, c -> c);

    assertThat(ran)
        .as(
            "the first claim committed granting attempt 1 to this instance: it runs %s once"
                + " (outcomes: %s, row: %s)",
            t2, outcomes, runs.at(job, t2))
        .extracting(ScheduledRun::scheduledAt)
        .containsExactly(t2);
    assertThat(outcomes)
        .singleElement()
        .isInstanceOfSatisfying(
            RunOutcome.Finished.class, f -> assertThat(f.run().attempt().value()).isEqualTo(1));
  }

  @Test
  void negativeControlWithoutTheClaimLockTheInFlightClaimIsNeverRun() throws Exception {
    String job = "in-flight-control";
    List<RunOutcome> outcomes =
        resendWhileFirstCommitInFlight(
            job, ScheduleConfig.Builder::withoutClaimLockForNegativeControl);

    assertThat(ran).as("outcomes: %s", outcomes).isEmpty();
    assertThat(outcomes).containsExactly(new RunOutcome.LostClaim(t2));
    assertThat(runs.at(job, t2).orElseThrow().state()).isEqualTo("running");
  }

  /**
   * An instance with {@code maxAttempts(1)} claims {@code t2}; the answer to the claim's {@code
   * COMMIT} is lost while the {@code COMMIT} is still on its way. The next pass runs while it is in
   * flight; the {@code COMMIT} lands once that pass waits for a lock of its transaction (or has
   * returned). Returns what that pass reported.
   */
  private List<RunOutcome> resendWhileFirstCommitInFlight(
      String job, UnaryOperator<ScheduleConfig.Builder> control) throws Exception {
    MutableClock clock = new MutableClock(t2.minusSeconds(1));
    HeldClaimCommit gate = new HeldClaimCommit(schema.jdbcUrl());
    try (ScheduledSingleton c =
        ScheduledSingleton.plain(
            gate.dataSource(),
            control
                .apply(ScheduleConfig.custom(job, EVERY_MINUTE).clock(clock).maxAttempts(1))
                .build(),
            ran::add)) {
      assertThat(c.runDueNow()).as("nothing due before the instance started").isEmpty();
      clock.set(t2.plusSeconds(1));
      gate.arm(HeldClaimCommit.Mode.LOSE_ANSWER);
      assertThatThrownBy(c::runDueNow)
          .as("the claim's COMMIT answer is lost; the COMMIT is still on its way")
          .isInstanceOf(BackendUnavailableException.class);

      CompletableFuture<List<RunOutcome>> again = CompletableFuture.supplyAsync(c::runDueNow);
      await("the next pass waits for the first claim's transaction, or has returned")
          .atMost(Duration.ofSeconds(30))
          .until(() -> again.isDone() || lockWaiters(gate) > 0);
      gate.release();
      gate.awaitCommitted();
      return again.get(30, TimeUnit.SECONDS);
    }
  }

  /**
   * An instance of {@code job} every minute on {@code clock}, its runs recorded in {@link #ran}.
   */
  private ScheduledSingleton instance(
      DataSource dataSource,
      String job,
      MutableClock clock,
      UnaryOperator<ScheduleConfig.Builder> settings) {
    return ScheduledSingleton.plain(
        dataSource,
        settings.apply(ScheduleConfig.custom(job, EVERY_MINUTE).clock(clock)).build(),
        ran::add);
  }

  /**
   * {@code real}, running {@code meanwhile} once, just before the first statement of the first
   * claim's transaction (the claim lock, or the claim when there is none) is sent: after the pass
   * planned, before it claims.
   */
  private static DataSource beforeClaim(DataSource real, Runnable meanwhile) {
    AtomicBoolean done = new AtomicBoolean();
    return proxy(
        DataSource.class,
        (p, m, args) -> {
          Object result = call(real, m, args);
          if (!(result instanceof Connection c)) {
            return result;
          }
          return proxy(
              Connection.class,
              (cp, cm, cargs) -> {
                if (cm.getName().equals("prepareStatement")
                    && cargs[0] instanceof String sql
                    && (sql.contains("pg_advisory_xact_lock") || sql.contains("INSERT INTO"))
                    && done.compareAndSet(false, true)) {
                  meanwhile.run();
                }
                return call(c, cm, cargs);
              });
        });
  }

  private static Object call(Object target, Method method, Object[] args) throws Throwable {
    try {
      return method.invoke(target, args);
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }

  @SuppressWarnings("unchecked")
  private static <T> T proxy(Class<T> type, InvocationHandler handler) {
    return (T) Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, handler);
  }

  private void seedDone(String job, Instant t) {
    schema
        .dsl()
        .execute(
            "INSERT INTO nolock_scheduled_runs (job, scheduled_at, state, attempt, owner,"
                + " covers_from, missed, claimed_at, finished_at) VALUES (?, CAST(? AS"
                + " timestamptz), 'done', 1, 'fleet#0000000000000000', CAST(? AS timestamptz), 0,"
                + " clock_timestamp(), clock_timestamp())",
            job,
            at(t),
            at(t));
  }

  /**
   * Server processes waiting for a lock (a row, an index key or an advisory lock) that the held
   * transaction holds.
   */
  private int lockWaiters(HeldClaimCommit gate) {
    return schema
        .dsl()
        .resultQuery(
            "SELECT count(*) FROM pg_stat_activity WHERE ? = ANY(pg_blocking_pids(pid))",
            gate.heldPid)
        .fetchOne(0, Integer.class);
  }

  private static OffsetDateTime at(Instant t) {
    return OffsetDateTime.ofInstant(t, ZoneOffset.UTC);
  }
}
