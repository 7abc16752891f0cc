package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.LostAnswerLockBackend.Mode;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.testkit.engine.Events;

/**
 * A suite that cannot fail proves nothing: the lost-answer contract passes a correct in-memory
 * backend whose client reports "unknown", and fails the same backend when its client resends a
 * release (the resend answers false), one whose resent acquire is refused, and one whose renew
 * extends whoever holds the lease.
 */
class LockBackendLostAnswerContractCatchesABrokenLockTest {

  private static final String ACQUIRE_FREE =
      "acquireOfAFreeNameAnswersItsGrantOrUnknownNeverARefusal(FaultKind)";
  private static final String RENEW_OVERTAKEN =
      "aRenewAnsweredAfterTheLeaseExpiredAndBTookItIsNeverTrue(FaultKind)";
  private static final String RELEASE =
      "releaseUnderAFaultAnswersTrueOrUnknownAndFreesTheName(FaultKind)";
  private static final String RELEASE_OVERTAKEN =
      "aReleaseWhoseAnswerIsLostWhileBTakesTheFreedLeaseIsNeverFalse()";

  /** The SPI in a few synchronized lines; the flags break it on purpose. */
  static class InMemory implements LockBackend {
    private record Entry(String owner, FencingToken token, long expiresAt) {}

    private final Map<String, Entry> leases = new HashMap<>();
    private final Map<String, Long> counters = new HashMap<>();
    private final boolean refusesItsHolder;
    private final boolean renewsBlindly;

    InMemory(boolean refusesItsHolder, boolean renewsBlindly) {
      this.refusesItsHolder = refusesItsHolder;
      this.renewsBlindly = renewsBlindly;
    }

    @Override
    public synchronized Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
      Entry current = live(name);
      if (current != null) {
        if (refusesItsHolder || !current.owner().equals(owner)) {
          return Option.none();
        }
        leases.put(name, new Entry(owner, current.token(), System.nanoTime() + ttl.toNanos()));
        return Option.some(current.token());
      }
      FencingToken token = FencingToken.of(counters.merge(name, 1L, Long::sum));
      leases.put(name, new Entry(owner, token, System.nanoTime() + ttl.toNanos()));
      return Option.some(token);
    }

    @Override
    public synchronized boolean renew(String name, String owner, FencingToken token, Duration ttl) {
      Entry current = live(name);
      if (current == null) {
        return false;
      }
      if (!renewsBlindly && !(current.owner().equals(owner) && current.token().equals(token))) {
        return false;
      }
      leases.put(
          name, new Entry(current.owner(), current.token(), System.nanoTime() + ttl.toNanos()));
      return true;
    }

    @Override
    public synchronized boolean release(String name, String owner, FencingToken token) {
      Entry current = live(name);
      if (current == null || !current.owner().equals(owner) || !current.token().equals(token)) {
        return false;
      }
      leases.remove(name);
      return true;
    }

    @Override
    public synchronized Option<LeaseHolder> holder(String name) {
      return Option.of(live(name)).map(e -> new LeaseHolder(e.owner(), e.token()));
    }

    synchronized Option<ObservedLease> peek(String name) {
      long now = System.nanoTime();
      return Option.of(leases.get(name))
          .map(
              e ->
                  new ObservedLease(
                      Option.some(new LeaseHolder(e.owner(), e.token())),
                      Option.none(),
                      Option.none(),
                      now - e.expiresAt() >= 0
                          ? Duration.ZERO
                          : Duration.ofNanos(e.expiresAt() - now)));
    }

    private Entry live(String name) {
      Entry entry = leases.get(name);
      return entry != null && System.nanoTime() - entry.expiresAt() < 0 ? entry : null;
    }
  }

  /** Run only through the engine (Surefire skips nested classes). */
  abstract static class InMemoryContract extends LockBackendLostAnswerContract {
    private final InMemory backend;
    private final LostAnswerLockBackend faulty;

    InMemoryContract(InMemory backend, Mode mode) {
      this.backend = backend;
      this.faulty = LostAnswerLockBackend.wrap(backend, mode);
    }

    @Override
    protected LockBackend backend() {
      return backend;
    }

    @Override
    protected LockBackend faultyBackend() {
      return faulty;
    }

    @Override
    protected Option<ObservedLease> peek(String name) {
      return backend.peek(name);
    }

    @Override
    protected InjectedFault inject(Operation op, FaultKind kind, Runnable meanwhile) {
      return faulty.arm(op, kind, meanwhile);
    }

    // Short, so that the cases that wait out a lease take little time.
    @Override
    protected Duration ttl() {
      return Duration.ofSeconds(2);
    }

    @Override
    protected Duration shortTtl() {
      return Duration.ofMillis(300);
    }
  }

  static class CorrectReportingUnknown extends InMemoryContract {
    CorrectReportingUnknown() {
      super(new InMemory(false, false), Mode.REPORTS);
    }
  }

  static class CorrectResending extends InMemoryContract {
    CorrectResending() {
      super(new InMemory(false, false), Mode.RESENDS);
    }
  }

  static class RefusesItsHolderResending extends InMemoryContract {
    RefusesItsHolderResending() {
      super(new InMemory(true, false), Mode.RESENDS);
    }
  }

  static class RenewsBlindlyResending extends InMemoryContract {
    RenewsBlindlyResending() {
      super(new InMemory(false, true), Mode.RESENDS);
    }
  }

  @Test
  void aCorrectBackendWhoseClientReportsUnknownPassesEveryCase() {
    Events tests = ContractRuns.run(CorrectReportingUnknown.class);

    assertThat(failures(tests)).isEmpty();
    assertThat(tests.succeeded().count()).as("6 cases x 2 fault kinds + 1").isEqualTo(13);
  }

  @Test
  void aResentReleaseThatAnswersFalseIsCaught() {
    Map<String, String> failed = failures(ContractRuns.run(CorrectResending.class));

    assertThat(failed.keySet())
        .as("only the releases whose resend met their own first effect")
        .containsExactlyInAnyOrder(RELEASE + " [ANSWER_LOST]", RELEASE_OVERTAKEN);
    assertThat(failed.get(RELEASE + " [ANSWER_LOST]")).contains("false is a false answer");
    assertThat(failed.get(RELEASE_OVERTAKEN)).contains("whose first send freed the lease");
  }

  @Test
  void aResentAcquireThatIsRefusedIsCaught() {
    Map<String, String> failed = failures(ContractRuns.run(RefusesItsHolderResending.class));

    assertThat(failed).containsKey(ACQUIRE_FREE + " [ANSWER_LOST]");
    assertThat(failed.get(ACQUIRE_FREE + " [ANSWER_LOST]")).contains("a refusal is a false answer");
    assertThat(failed).doesNotContainKey(ACQUIRE_FREE + " [REQUEST_LOST]");
  }

  @Test
  void aRenewThatExtendsAnotherOwnersLeaseIsCaught() {
    Map<String, String> failed = failures(ContractRuns.run(RenewsBlindlyResending.class));

    assertThat(failed)
        .containsKeys(RENEW_OVERTAKEN + " [ANSWER_LOST]", RENEW_OVERTAKEN + " [REQUEST_LOST]");
    assertThat(failed.get(RENEW_OVERTAKEN + " [REQUEST_LOST]")).contains("false or unknown");
  }

  /** Each failed case's display name (with its fault kind) and its failure message. */
  private static Map<String, String> failures(Events tests) {
    return tests.failed().stream()
        .collect(
            Collectors.toMap(
                e -> e.getTestDescriptor().getDisplayName(),
                e ->
                    e.getPayload(TestExecutionResult.class)
                        .flatMap(TestExecutionResult::getThrowable)
                        .map(Throwable::toString)
                        .orElse("")));
  }
}
