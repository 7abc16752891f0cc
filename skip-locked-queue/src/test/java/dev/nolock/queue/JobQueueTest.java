package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.ManualLeaseClock;
import io.vavr.control.Option;
import java.time.Duration;
import java.time.Instant;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;

/** Misuse is refused before any SQL is sent (the data source here points nowhere). */
class JobQueueTest {

  private final JobQueue<String> queue =
      JobQueue.create(
          new PGSimpleDataSource(), QueueConfig.ofDefaults("mail"), PayloadCodec.utf8());

  private static Job<String> jobOf(String queue) {
    Instant now = Instant.now();
    return new Job<>(
        7,
        queue,
        2,
        "x",
        null,
        now,
        now,
        now,
        0,
        3,
        Deadline.forHolder(new ManualLeaseClock(), 0, Duration.ofSeconds(30)));
  }

  @Test
  void aJobOfAnotherQueueCannotBeFinishedHere() {
    Job<String> foreign = jobOf("billing");
    assertThatThrownBy(() -> queue.complete(foreign))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("belongs to queue \"billing\"");
    assertThatThrownBy(() -> queue.fail(foreign, "e")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> queue.heartbeat(foreign)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> queue.release(foreign)).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> queue.completeWith(foreign, tx -> 1))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void claimAndPurgeRefuseNonsenseArguments() {
    assertThatThrownBy(() -> queue.claim(0)).hasMessageContaining("1 to 10000");
    assertThatThrownBy(() -> queue.claim(JobQueue.MAX_CLAIM + 1))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> queue.purgeFinished(Duration.ofSeconds(-1)))
        .hasMessageContaining("zero or more");
  }

  @Test
  void theAttemptIsTheJobsFencingTokenAndEqualityIsByIdAndAttempt() {
    Job<String> job = jobOf("mail");
    assertThat(job.token().value()).isEqualTo(2);
    assertThat(job).isEqualTo(jobOf("other-view-of-the-same-attempt"));
    assertThat(job.isLastAttempt()).isFalse();
  }

  @Test
  void aStaleAttemptSaysWhatHappenedToTheJob() {
    assertThat(new StaleAttempt(7, 2, Option.of(JobState.RUNNING), Option.of(3L)).describe())
        .contains("attempt 2")
        .contains("running at attempt 3")
        .contains("re-claimed");
    assertThat(new StaleAttempt(7, 2, Option.of(JobState.DONE), Option.of(3L)).describe())
        .contains("done at attempt 3");
    StaleAttempt gone = new StaleAttempt(7, 2, Option.none(), Option.none());
    assertThat(gone.jobGone()).isTrue();
    assertThat(gone.completedByThisAttempt()).isFalse();
    assertThat(gone.describe())
        .contains("no longer exists")
        .contains(
            "Whether this attempt completed it, in an earlier call whose answer was lost, is"
                + " unknown");
    assertThat(new StaleAttempt(7, 2, Option.of(JobState.READY), Option.of(2L)).describe())
        .contains("ready at attempt 2")
        .contains("or failed or released by an earlier call of this attempt");
  }

  @Test
  void theDatabaseStateNamesAreTheEnumNamesInLowerCase() {
    for (JobState state : JobState.values()) {
      assertThat(JobState.fromSql(state.sqlValue())).isEqualTo(state);
    }
    assertThat(JobState.READY.sqlValue()).isEqualTo("ready");
  }
}
