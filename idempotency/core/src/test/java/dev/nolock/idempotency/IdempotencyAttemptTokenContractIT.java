package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import dev.nolock.idempotency.internal.Safeguards;
import dev.nolock.testkit.AttemptTokenContract;
import dev.nolock.testkit.PostgresSchema;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.testkit.engine.EngineTestKit;

/**
 * Idempotency keys pass testkit's {@link AttemptTokenContract} against the real PostgreSQL (the
 * mapping is {@link KeyAttemptsContract}'s): a stale attempt cannot finish, whichever finishes
 * first; a finish whose {@code COMMIT} answer or request is lost, and the caller's repeat, end as
 * one effect; two attempts of one key in one process are each answered as themselves.
 *
 * <p>Negative control: the same suite with the attempt-token check switched off catches every stale
 * finish, so neither the suite nor the mapping passes by construction.
 */
class IdempotencyAttemptTokenContractIT extends KeyAttemptsContract {

  IdempotencyAttemptTokenContractIT(PostgresSchema schema) {
    super(schema, Safeguards.ALL);
  }

  /** Run only by the negative control (Failsafe skips nested classes). */
  static class WithoutTheAttemptTokenCheck extends KeyAttemptsContract {
    WithoutTheAttemptTokenCheck(PostgresSchema schema) {
      super(schema, new Safeguards(true, false));
    }
  }

  @Test
  void negativeControlWithoutTheAttemptTokenCheckTheStaleFinishesAreCaught() {
    Map<String, String> failures =
        EngineTestKit.engine("junit-jupiter")
            .selectors(selectClass(WithoutTheAttemptTokenCheck.class))
            .execute()
            .testEvents()
            .failed()
            .stream()
            .collect(
                Collectors.toMap(
                    e -> e.getTestDescriptor().getDisplayName(),
                    e ->
                        e.getPayload(TestExecutionResult.class)
                            .flatMap(TestExecutionResult::getThrowable)
                            .map(Throwable::getMessage)
                            .orElse("")));

    assertThat(failures.keySet())
        .containsExactlyInAnyOrder(
            "aStaleAttemptCannotFinishBeforeTheNewOne()",
            "aStaleAttemptCannotFinishAfterTheNewOne()",
            "aRetriedFinishOfAStaleAttemptIsStillStale()",
            "twoAttemptsOfOneItemInOneProcessAreEachAnsweredAsThemselves()");
    assertThat(failures.get("aStaleAttemptCannotFinishBeforeTheNewOne()"))
        .contains("the stale attempt's finish")
        .contains("FINISHED");
    assertThat(failures.get("aRetriedFinishOfAStaleAttemptIsStillStale()"))
        .as("the stale commit landed under the lost answer; its repeat replays it as its own")
        .contains("its retry")
        .contains("ALREADY_FINISHED");
  }
}
