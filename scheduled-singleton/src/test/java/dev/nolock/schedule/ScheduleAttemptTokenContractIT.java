package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.testkit.AttemptTokenContract;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Option;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import org.jooq.DSLContext;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.platform.engine.discovery.DiscoverySelectors;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Events;

/**
 * The scheduled singleton under testkit's {@link AttemptTokenContract}, against the real
 * PostgreSQL, through the public API only.
 *
 * <ul>
 *   <li><b>Item</b>: one scheduled time (03:00) of a daily job of its own.
 *   <li><b>claim</b>: a new {@link ScheduledSingleton} instance in this JVM, configured with the
 *       same owner as every other (so only the per-instance identity tells them apart), runs a pass
 *       on a thread of its own: it claims the time, or takes it over once the lease lapsed, and its
 *       {@link FencedJob} is entered and parked there, holding the attempt. Empty when the pass ran
 *       no job (the time is held by a live attempt: a lost claim).
 *   <li><b>lapse</b>: the lease is judged by PostgreSQL's {@code clock_timestamp()} alone, on
 *       purpose, so no controlled clock can end it; the test moves {@code locked_until} into the
 *       past, which is the state the database reaches when a lease runs out unrenewed. The parked
 *       attempt still believes in its run, as a paused process would.
 *   <li><b>finish</b>: the parked job writes its ledger row through {@code tx} (the {@link
 *       FencedJob} way, in a ledger without a unique key) and returns; the engine finishes the run
 *       in that transaction. {@link RunOutcome.Finished} is FINISHED, {@link
 *       RunOutcome.StaleAttempt} is STALE, {@link BackendUnavailableException} is "unknown". The
 *       scheduler has no call that finishes an attempt again: after a pass the loop's next step is
 *       another pass of the same instance, so a repeated finish is that pass, answered by what it
 *       reports about the time; when it reports nothing, the attempt's earlier definite answer
 *       stands (FINISHED becomes ALREADY_FINISHED), and without one the caller never learnt the
 *       outcome, which fails the case.
 *   <li><b>finishWithFault</b>: the same with testkit's {@link JdbcFaults} on the finish: its
 *       {@code COMMIT} is lost (applied with its answer lost, or lost before PostgreSQL saw it). A
 *       stale attempt's finish sends no {@code COMMIT} (its {@code UPDATE} matches no row and the
 *       transaction rolls back), so for it the fault is on the last request it does send, that
 *       {@code UPDATE}. Every fault is asserted to have fired.
 *   <li><b>effects</b>: the ledger rows of the item's job.
 * </ul>
 *
 * <p>The negative control runs the same suite with the attempt check switched off (the finish
 * matches the run by job and time alone) and requires the stale cases to fail.
 */
@ExtendWith(PostgresExtension.class)
class ScheduleAttemptTokenContractIT
    extends AttemptTokenContract<ScheduleAttemptTokenContractIT.Attempt> {

  private static final CronSchedule DAILY_AT_3 = CronSchedule.unix("0 3 * * *");
  private static final Instant THREE_AM = Instant.parse("2026-03-10T03:00:00Z");

  /** Long enough that no renewal runs during a case: leases end only by {@link #lapse}. */
  private static final Duration LEASE = Duration.ofMinutes(10);

  /** One configured owner for every instance, as when owners are set by hand. */
  private static final String OWNER = "contract-service";

  private static final Duration WAIT = Duration.ofSeconds(30);

  /**
   * The finish's {@code UPDATE}. Statements that end a run in another way render the same, but none
   * is sent while a finish is under way in these cases.
   */
  private static final Predicate<String> FINISH =
      JdbcFaults.sqlContaining("\"finished_at\" = clock_timestamp()");

  private static final AtomicInteger ITEMS = new AtomicInteger();

  private final PostgresSchema schema;
  private final Runs runs;

  private final List<Instance> instances = new CopyOnWriteArrayList<>();

  /** Per item: how many attempts were claimed, so an attempt knows whether a newer one exists. */
  private final Map<String, Integer> claims = new ConcurrentHashMap<>();

  private JdbcFaults faults;
  private ExecutorService passes;

  ScheduleAttemptTokenContractIT(PostgresSchema schema) {
    this.schema = schema;
    this.runs = new Runs(schema.dsl());
  }

  @BeforeAll
  static void createTables(PostgresSchema schema) {
    ScheduledSingleton.plain(
            schema.dataSource(), ScheduleConfig.custom("setup", DAILY_AT_3).build(), r -> {})
        .createTableIfMissing();
    schema
        .dsl()
        .execute(
            "CREATE TABLE contract_ledger (job text NOT NULL, scheduled_at timestamptz NOT NULL,"
                + " attempt bigint NOT NULL)"); // no unique key: it counts effects
  }

  /** The configuration of every instance; the negative control switches the attempt check off. */
  ScheduleConfig.Builder configure(ScheduleConfig.Builder builder) {
    return builder;
  }

  @BeforeEach
  void open() {
    faults = JdbcFaults.pool(schema.jdbcUrl());
    passes = Executors.newCachedThreadPool();
  }

  @AfterEach
  void close() throws InterruptedException {
    for (Instance instance : instances) {
      instance.abandon();
    }
    passes.shutdown();
    passes.awaitTermination(WAIT.toSeconds(), TimeUnit.SECONDS);
    instances.forEach(instance -> instance.scheduler.close());
    faults.close();
  }

  /** A claimed attempt: the run its parked job holds, and the pass that runs it. */
  static final class Attempt {
    final String item;
    final Instance instance;
    final ScheduledRun run;
    final CompletableFuture<Boolean> proceed;
    final CompletableFuture<List<RunOutcome>> pass;
    final int claimNumber;

    /** The last definite answer a finish of this attempt got; null while none. */
    Finish answered;

    Attempt(
        String item,
        Instance instance,
        Parked parked,
        CompletableFuture<List<RunOutcome>> pass,
        int claimNumber) {
      this.item = item;
      this.instance = instance;
      this.run = parked.run();
      this.proceed = parked.proceed();
      this.pass = pass;
      this.claimNumber = claimNumber;
    }

    @Override
    public String toString() {
      return item + " attempt " + run.attempt().value();
    }
  }

  /** A job that was entered and waits for the test: true writes and returns, false throws. */
  record Parked(ScheduledRun run, CompletableFuture<Boolean> proceed) {}

  /** One scheduler instance; its first job parks, later ones run straight through. */
  final class Instance {
    final MutableClock clock = new MutableClock(THREE_AM.minusSeconds(60));
    final CompletableFuture<Parked> entered = new CompletableFuture<>();
    final ScheduledSingleton scheduler;

    Instance(String item) {
      scheduler =
          ScheduledSingleton.fenced(
              faults.dataSource(),
              configure(ScheduleConfig.custom(item, DAILY_AT_3))
                  .clock(clock)
                  .claimWindow(MutableClock.ANY_DATE)
                  .owner(OWNER)
                  .lease(LEASE)
                  .build(),
              this::job);
      clock.set(THREE_AM.plusMillis(100));
    }

    private void job(ScheduledRun run, DSLContext tx) throws Exception {
      if (!entered.isDone()) {
        CompletableFuture<Boolean> proceed = new CompletableFuture<>();
        entered.complete(new Parked(run, proceed));
        if (!proceed.get(WAIT.toSeconds(), TimeUnit.SECONDS)) {
          throw new IllegalStateException("the test ended before " + run + " finished");
        }
      }
      tx.execute(
          "INSERT INTO contract_ledger (job, scheduled_at, attempt)"
              + " VALUES (?, CAST(? AS timestamptz), ?)",
          run.job(),
          OffsetDateTime.ofInstant(run.scheduledAt(), ZoneOffset.UTC),
          run.attempt().value());
    }

    void abandon() {
      entered.thenAccept(parked -> parked.proceed().complete(false));
    }
  }

  @Override
  protected String newItem() {
    return "item-" + ITEMS.incrementAndGet();
  }

  @Override
  protected Option<Attempt> claim(String item) {
    Instance instance = new Instance(item);
    instances.add(instance);
    CompletableFuture<List<RunOutcome>> pass =
        CompletableFuture.supplyAsync(instance.scheduler::runDueNow, passes);
    await(CompletableFuture.anyOf(instance.entered, pass));
    if (instance.entered.isDone()) {
      int claimNumber = claims.merge(item, 1, Integer::sum);
      return Option.some(new Attempt(item, instance, instance.entered.join(), pass, claimNumber));
    }
    assertThat(pass.join())
        .as("a pass of %s that ran no job", item)
        .containsExactly(new RunOutcome.LostClaim(THREE_AM));
    return Option.none();
  }

  @Override
  protected void lapse(String item) {
    runs.expireLease(item, THREE_AM);
  }

  @Override
  protected long token(Attempt attempt) {
    return attempt.run.attempt().value();
  }

  @Override
  protected Finish finish(Attempt attempt) {
    List<RunOutcome> outcomes;
    if (!attempt.pass.isDone()) {
      attempt.proceed.complete(true);
      outcomes = await(attempt.pass);
    } else {
      // The job has returned: the loop's next step is another pass of the same instance.
      outcomes = attempt.instance.scheduler.runDueNow();
    }
    return answer(attempt, outcomes);
  }

  @Override
  protected Finish finishWithFault(Attempt attempt, FaultKind kind) {
    boolean stale = attempt.claimNumber < claims.get(attempt.item);
    InjectedFault fault =
        stale
            ? faults.onNextStatement(kind, FINISH)
            : faults.onNextCommit(kind, JdbcFaults.sqlContaining("contract_ledger"));
    try {
      Finish heard = finish(attempt);
      fault.assertFired();
      return heard;
    } catch (BackendUnavailableException unknown) {
      fault.assertFired();
      throw unknown;
    } finally {
      faults.disarmAll();
    }
  }

  @Override
  protected int effects(String item) {
    return schema
        .dsl()
        .fetchCount(schema.dsl().selectFrom("contract_ledger").where("job = ?", item));
  }

  /** What a pass reported about the attempt's time, as the contract's answer. */
  private static Finish answer(Attempt attempt, List<RunOutcome> outcomes) {
    Optional<RunOutcome> about =
        outcomes.stream()
            .filter(o -> o.scheduledAt().equals(attempt.run.scheduledAt()))
            .filter(o -> !(o instanceof RunOutcome.LostClaim || o instanceof RunOutcome.Missed))
            .findFirst();
    if (about.isEmpty()) {
      if (attempt.answered == null) {
        throw new AssertionError(
            "After the finish of "
                + attempt
                + " was unknown, the next pass reported nothing about "
                + attempt.run.scheduledAt()
                + ": the caller never learns the outcome (the pass said "
                + outcomes
                + ")");
      }
      return attempt.answered == Finish.FINISHED ? Finish.ALREADY_FINISHED : attempt.answered;
    }
    if (about.get() instanceof RunOutcome.Finished) {
      attempt.answered = Finish.FINISHED;
    } else if (about.get() instanceof RunOutcome.StaleAttempt) {
      attempt.answered = Finish.STALE;
    } else {
      throw new AssertionError("Unexpected outcome of " + attempt + ": " + about.get());
    }
    return attempt.answered;
  }

  private static <T> T await(CompletableFuture<T> future) {
    try {
      return future.get(WAIT.toSeconds(), TimeUnit.SECONDS);
    } catch (ExecutionException e) {
      if (e.getCause() instanceof RuntimeException runtime) {
        throw runtime;
      }
      throw new AssertionError(e.getCause());
    } catch (TimeoutException e) {
      throw new AssertionError("a pass took longer than " + WAIT, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new AssertionError(e);
    }
  }

  /**
   * The negative control: with the finish matching the run by job and time alone, a stale attempt
   * finishes and writes, and the contract must say so.
   */
  static class WithoutTheAttemptCheck extends ScheduleAttemptTokenContractIT {
    WithoutTheAttemptCheck(PostgresSchema schema) {
      super(schema);
    }

    @Override
    ScheduleConfig.Builder configure(ScheduleConfig.Builder builder) {
      return builder.withoutAttemptCheckForNegativeControl();
    }
  }

  @Test
  void theContractCatchesTheSchedulerWithoutItsAttemptCheck() {
    if (getClass() != ScheduleAttemptTokenContractIT.class) {
      return; // the control itself runs only from the suite proper
    }
    Events tests =
        EngineTestKit.engine("junit-jupiter")
            .selectors(DiscoverySelectors.selectClass(WithoutTheAttemptCheck.class))
            .execute()
            .testEvents();

    assertThat(tests.started().count()).as("the control ran the contract").isGreaterThan(5);
    assertThat(tests.failed().stream().map(event -> event.getTestDescriptor().getDisplayName()))
        .as("the stale finishes are caught")
        .contains(
            "aStaleAttemptCannotFinishBeforeTheNewOne()",
            "aStaleAttemptCannotFinishAfterTheNewOne()",
            "twoAttemptsOfOneItemInOneProcessAreEachAnsweredAsThemselves()");
  }
}
