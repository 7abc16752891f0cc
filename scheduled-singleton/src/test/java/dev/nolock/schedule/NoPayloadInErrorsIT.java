package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.ErrorDescriber;
import dev.nolock.testkit.CapturedStderr;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.IOException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What the scheduler records of a job's failure carries no payload data: the job's exception
 * message (which quotes whatever the job was working on) stays out of the run's {@code last_error},
 * out of the log lines the scheduler writes, which name the exception's class, the job, the time
 * and the attempt, and out of {@link RunOutcome.Failed}'s text; the exception itself still reaches
 * the caller in the outcome.
 */
@ExtendWith(PostgresExtension.class)
class NoPayloadInErrorsIT {

  private static final String CARD = "4111-1111-1111-1111";
  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");
  private static final CronSchedule EVERY_SECOND = CronSchedule.quartz("* * * * * ?");
  private static final Instant MINUTE = Instant.parse("2026-03-10T10:01:00Z");

  private static DataSource pool;
  private static Runs runs;

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    pool = schema.dataSource();
    runs = new Runs(schema.dsl());
    ScheduledSingleton.plain(pool, ScheduleConfig.custom("setup", EVERY_MINUTE).build(), r -> {})
        .createTableIfMissing();
  }

  private final MutableClock clock = new MutableClock(MINUTE.minusSeconds(30));

  private ScheduleConfig.Builder config(String job) {
    return ScheduleConfig.custom(job, EVERY_MINUTE)
        .clock(clock)
        .claimWindow(MutableClock.ANY_DATE)
        .maxAttempts(2);
  }

  private static void declined(ScheduledRun run) {
    throw new IllegalStateException(
        "card " + CARD + " declined", new IOException("gateway answered for " + CARD));
  }

  @Test
  void aJobsFailureIsStoredAndLoggedByItsClassNamesWithoutItsMessages() {
    String job = "declines";
    List<RunOutcome> outcomes = new ArrayList<>();
    Runs.Row retried;
    String logged;
    try (CapturedStderr log = new CapturedStderr();
        ScheduledSingleton instance =
            ScheduledSingleton.plain(pool, config(job).build(), NoPayloadInErrorsIT::declined)) {
      clock.set(MINUTE.plusMillis(100));
      outcomes.addAll(instance.runDueNow());
      retried = runs.at(job, MINUTE).orElseThrow();
      outcomes.addAll(instance.runDueNow());
      logged = log.text();
    }
    String classes = "java.lang.IllegalStateException; caused by java.io.IOException";
    assertThat(retried.state()).isEqualTo("running");
    assertThat(retried.lastError()).isEqualTo(classes);
    Runs.Row failed = runs.at(job, MINUTE).orElseThrow();
    assertThat(failed.state()).isEqualTo("failed");
    assertThat(failed.lastError()).isEqualTo(classes);

    assertThat(logged)
        .doesNotContain("4111")
        .contains("Job " + job + ": attempt 1 of " + MINUTE)
        .contains("Job " + job + ": attempt 2 of " + MINUTE)
        .contains(classes);

    assertThat(outcomes).hasSize(2).allMatch(o -> o instanceof RunOutcome.Failed);
    for (RunOutcome outcome : outcomes) {
      RunOutcome.Failed f = (RunOutcome.Failed) outcome;
      assertThat(f.toString()).doesNotContain("4111").contains(classes);
      assertThat(f.error()).as("the exception is the caller's").hasMessageContaining(CARD);
    }
  }

  /** The negative control: with the messages kept, the same failure's text is there to see. */
  @Test
  void withTheMessagesDescriberTheJobsMessagesAreStoredAndLogged() {
    String job = "declines-verbosely";
    String logged;
    try (CapturedStderr log = new CapturedStderr();
        ScheduledSingleton instance =
            ScheduledSingleton.plain(
                pool,
                config(job).maxAttempts(1).errorDescriber(ErrorDescriber.messages()).build(),
                NoPayloadInErrorsIT::declined)) {
      clock.set(MINUTE.plusMillis(100));
      assertThat(instance.runDueNow()).singleElement().isInstanceOf(RunOutcome.Failed.class);
      logged = log.text();
    }
    String described =
        "java.lang.IllegalStateException: card "
            + CARD
            + " declined; caused by java.io.IOException: gateway answered for "
            + CARD;
    assertThat(runs.at(job, MINUTE).orElseThrow().lastError()).isEqualTo(described);
    assertThat(logged).contains("attempt 1 of " + MINUTE + " threw " + described);
  }

  /**
   * The loop tells the listener of each outcome and logs the listener's failure: neither the
   * listener's exception message nor the job's (inside the outcome the line names) is written.
   */
  @Test
  void aThrowingListenersFailureIsLoggedByItsClassNamesAndTheOutcomeWithoutMessages() {
    assertThat(logOfAThrowingListener("declines-loudly", ErrorDescriber.classNames()))
        .doesNotContain("4111")
        .contains("the outcome listener threw java.lang.IllegalArgumentException on Failed[")
        .contains("error=java.lang.IllegalStateException; caused by java.io.IOException");
  }

  /** The negative control: with the messages kept, the listener's text is there to see. */
  @Test
  void withTheMessagesDescriberTheListenersMessageIsLogged() {
    assertThat(logOfAThrowingListener("declines-verbose-listener", ErrorDescriber.messages()))
        .contains(
            "the outcome listener threw java.lang.IllegalArgumentException: cannot file " + CARD);
  }

  /** What the loop logs while its job and its outcome listener both throw, until one is logged. */
  private static String logOfAThrowingListener(String job, ErrorDescriber describer) {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (CapturedStderr log = new CapturedStderr();
        ScheduledSingleton loop =
            ScheduledSingleton.plain(
                pool,
                ScheduleConfig.custom(job, EVERY_SECOND)
                    .metrics(registry, job)
                    .errorDescriber(describer)
                    .onOutcome(
                        outcome -> {
                          throw new IllegalArgumentException("cannot file " + CARD);
                        })
                    .build(),
                NoPayloadInErrorsIT::declined)) {
      loop.start();
      await("a listener failure")
          .atMost(Duration.ofSeconds(15))
          .until(
              () ->
                  registry.find("nolock.schedule.listener.failures").counter() != null
                      && registry.get("nolock.schedule.listener.failures").counter().count() >= 1);
      return log.text();
    }
  }
}
