package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;
import org.junit.platform.testkit.engine.EngineTestKit;

/**
 * The renewal tests can fail: a lock that is correct except that a renewal only ever lengthens a
 * lease (a common "extend" that takes the later of the two ends) fails the shorter-renewal test and
 * nothing else.
 */
class LockBackendContractCatchesARenewalThatNeverShortensTest {

  /** A correct single-process lock on {@link System#nanoTime()}, but renew never shortens. */
  static final class NeverShortens implements LockBackend {
    private record Entry(String owner, FencingToken token, long expiresAt) {}

    private final Map<String, Entry> leases = new HashMap<>();
    private final Map<String, Long> counters = new HashMap<>();

    private static boolean live(Entry e) {
      return e != null && System.nanoTime() - e.expiresAt() < 0;
    }

    @Override
    public synchronized Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
      Entry current = leases.get(name);
      if (live(current)) {
        return current.owner().equals(owner) ? Option.some(current.token()) : Option.none();
      }
      FencingToken token = FencingToken.of(counters.merge(name, 1L, Long::sum));
      leases.put(name, new Entry(owner, token, System.nanoTime() + ttl.toNanos()));
      return Option.some(token);
    }

    @Override
    public synchronized boolean renew(String name, String owner, FencingToken token, Duration ttl) {
      Entry current = leases.get(name);
      if (!live(current) || !current.owner().equals(owner) || !current.token().equals(token)) {
        return false;
      }
      long asked = System.nanoTime() + ttl.toNanos();
      long end = asked - current.expiresAt() > 0 ? asked : current.expiresAt(); // the bug
      leases.put(name, new Entry(owner, token, end));
      return true;
    }

    @Override
    public synchronized boolean release(String name, String owner, FencingToken token) {
      Entry current = leases.get(name);
      if (!live(current) || !current.owner().equals(owner) || !current.token().equals(token)) {
        return false;
      }
      leases.put(name, new Entry(owner, token, System.nanoTime()));
      return true;
    }

    @Override
    public synchronized Option<LeaseHolder> holder(String name) {
      Entry current = leases.get(name);
      return live(current)
          ? Option.some(new LeaseHolder(current.owner(), current.token()))
          : Option.none();
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
                      live(e) ? Duration.ofNanos(e.expiresAt() - now) : Duration.ZERO));
    }
  }

  /** Run only through the engine below (Surefire skips nested classes). */
  static class NeverShortensContract extends LockBackendContract {
    private final NeverShortens backend = new NeverShortens();

    @Override
    protected LockBackend backend() {
      return backend;
    }

    @Override
    protected Option<ObservedLease> peek(String name) {
      return backend.peek(name);
    }

    @Override
    protected Duration shortTtl() {
      return Duration.ofMillis(200);
    }
  }

  @Test
  void aRenewalThatNeverShortensFailsTheShorterRenewalTestOnly() {
    var failed =
        EngineTestKit.engine("junit-jupiter")
            .selectors(selectClass(NeverShortensContract.class))
            .execute()
            .testEvents()
            .failed()
            .stream()
            .map(e -> e.getTestDescriptor().getDisplayName())
            .collect(Collectors.toSet());

    assertThat(failed).containsExactly("renewalToAShorterLengthShortensTheLease()");
  }
}
