package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Events;

/** A suite that cannot fail proves nothing: a lock that always grants must fail it. */
class LockBackendContractCatchesABrokenLockTest {

  /** Grants everyone, renews everything, releases anything; its tokens still rise. */
  static final class AlwaysGrants implements LockBackend {
    final AtomicLong counter = new AtomicLong();
    final AtomicReference<LeaseHolder> last = new AtomicReference<>();

    @Override
    public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
      FencingToken token = FencingToken.of(counter.incrementAndGet());
      last.set(new LeaseHolder(owner, token));
      return Option.some(token);
    }

    @Override
    public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
      return true;
    }

    @Override
    public boolean release(String name, String owner, FencingToken token) {
      return true;
    }

    @Override
    public Option<LeaseHolder> holder(String name) {
      return Option.of(last.get());
    }
  }

  /** Run only through the engine below (Surefire skips nested classes). */
  static class AlwaysGrantsContract extends LockBackendContract {
    private final AlwaysGrants backend = new AlwaysGrants();

    @Override
    protected LockBackend backend() {
      return backend;
    }

    @Override
    protected Option<ObservedLease> peek(String name) {
      // Its leases never expire: the wait is always a whole TTL away.
      return Option.of(backend.last.get())
          .map(
              holder ->
                  new ObservedLease(
                      Option.some(holder), Option.none(), Option.none(), Duration.ofDays(1)));
    }

    @Override
    protected Duration shortTtl() {
      return Duration.ofMillis(100); // its leases never expire; keep the expiry waits short
    }
  }

  @Test
  void aLockThatAlwaysGrantsFailsTheRefusalTestsAndTheConcurrencyFuzz() {
    Events tests =
        EngineTestKit.engine("junit-jupiter")
            .selectors(selectClass(AlwaysGrantsContract.class))
            .execute()
            .testEvents();

    var failed =
        tests.failed().stream()
            .map(e -> e.getTestDescriptor().getDisplayName())
            .collect(Collectors.toSet());
    assertThat(failed)
        .contains(
            "aSecondAcquireIsRefusedWhileHeld()",
            "aStaleReleaseDoesNotFreeTheNextHolder()",
            "releaseWithAnotherOwnersNameOrAnOldTokenChangesNothing()",
            "renewalAfterAnotherHolderTookOverFailsAndLeavesTheirLeaseAlone()",
            "renewalByANonHolderFails()",
            "holderNamesTheOwnerAndTokenOfTheUnexpiredLeaseOnly()",
            "concurrentHoldersNeverOverlap()");
    String fuzzFailure =
        tests.failed().stream()
            .filter(e -> e.getTestDescriptor().getDisplayName().startsWith("concurrentHolders"))
            .map(
                e ->
                    e.getPayload(org.junit.platform.engine.TestExecutionResult.class)
                        .flatMap(org.junit.platform.engine.TestExecutionResult::getThrowable)
                        .map(Throwable::getMessage)
                        .orElse(""))
            .findFirst()
            .orElseThrow();
    assertThat(fuzzFailure)
        .as("caught by the non-atomic counter, not by a side check")
        .contains("no increment lost");
  }
}
