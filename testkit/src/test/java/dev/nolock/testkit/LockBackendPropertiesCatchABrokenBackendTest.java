package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import io.vavr.control.Option;
import java.time.Duration;
import org.junit.jupiter.api.Test;
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
    protected Option<ObservedLease> peek(String name) {
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

  @Test
  void anHonestBackendPassesWithEveryFaultActionOverItsFloor() {
    Events events = ContractRuns.runProperties(Honest.class);

    assertThat(ContractRuns.firstFailure(events)).isEmpty();
    assertThat(events.succeeded().count()).isEqualTo(1);
  }

  @Test
  void aClientThatTrustsItsResendFailsOnAFalseDefiniteOutcome() {
    Events events = ContractRuns.runProperties(TrustsItsResend.class);

    assertThat(events.failed().count()).isEqualTo(1);
    assertThat(ContractRuns.firstFailure(events))
        .contains("answered false")
        .contains("ANSWER_LOST");
  }
}
