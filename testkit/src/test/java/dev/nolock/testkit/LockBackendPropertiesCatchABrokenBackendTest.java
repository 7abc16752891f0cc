package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import dev.nolock.patterns.LockBackend;
import java.time.Duration;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Events;

/**
 * {@link LockBackendProperties} passes an honest in-memory backend and fails one whose client
 * trusts its own resend after a lost answer (a resent release that landed answers false).
 */
class LockBackendPropertiesCatchABrokenBackendTest {

  /** Run only through the engine below (Surefire skips nested classes). */
  static class Honest extends LockBackendProperties {
    final InMemoryLeases leases = new InMemoryLeases();
    final LostAnswerInMemory faulty = new LostAnswerInMemory(leases, resending());

    boolean resending() {
      return false;
    }

    @Override
    protected LockBackend backend() {
      return leases;
    }

    @Override
    protected LockBackend faultyBackend() {
      return faulty;
    }

    @Override
    protected Optional<PeekedLease> peek(String name) {
      return leases.peek(name);
    }

    @Override
    protected InjectedFault inject(Operation op, FaultKind kind, Runnable meanwhile) {
      return faulty.arm(op, kind, meanwhile);
    }

    @Override
    protected Duration shortTtl() {
      return Duration.ofMillis(50);
    }

    @Override
    public int defaultTries() {
      return 40;
    }
  }

  /** Its client resends a request whose answer was lost and reports the resend's answer. */
  static class TrustsItsResend extends Honest {
    @Override
    boolean resending() {
      return true;
    }
  }

  static Events run(Class<?> properties) {
    return EngineTestKit.engine("jqwik").selectors(selectClass(properties)).execute().testEvents();
  }

  static String failure(Events events) {
    return events.failed().stream()
        .findFirst()
        .flatMap(
            e ->
                e.getPayload(org.junit.platform.engine.TestExecutionResult.class)
                    .flatMap(org.junit.platform.engine.TestExecutionResult::getThrowable))
        .map(Throwable::getMessage)
        .orElse("");
  }

  @Test
  void anHonestBackendPassesWithEveryFaultActionOverItsFloor() {
    Events events = run(Honest.class);

    assertThat(failure(events)).isEmpty();
    assertThat(events.succeeded().count()).isEqualTo(1);
  }

  @Test
  void aClientThatTrustsItsResendFailsOnAFalseDefiniteOutcome() {
    Events events = run(TrustsItsResend.class);

    assertThat(events.failed().count()).isEqualTo(1);
    assertThat(failure(events)).contains("answered false").contains("ANSWER_LOST");
  }
}
