package dev.nolock.lock;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import java.util.Objects;

/**
 * The reference {@link LockBackend}: the whole contract in a few synchronized lines, for unit tests
 * and for readers. It coordinates threads of one JVM only.
 *
 * <p>Expiry is judged on the injected {@link LeaseClock}, which plays the server's clock. The token
 * counter per name lives apart from the leases, so a release never resets it.
 *
 * <p>Lost answers: a call here has no network, so its answer cannot be lost and nothing resends it;
 * behind a connection that loses answers and a client that reports "unknown" it passes testkit's
 * {@code LockBackendLostAnswerContract}. It is not a model for a backend whose client resends a
 * request after a lost answer: there the resend meets the first send's effect, and this class would
 * answer a resent acquire empty (it refuses the holding owner) and a resent release false (already
 * free), both false answers. Such a backend must recognise its own first effect (as {@code
 * DynamoDbLockBackend} does with the rvn it wrote) or answer unknown.
 */
public final class InMemoryLockBackend implements LockBackend {

  /** What is stored for a name; {@code expired} as judged by this backend's clock now. */
  public record StoredLease(String owner, FencingToken token, boolean expired) {}

  private record Entry(String owner, FencingToken token, long expiresAtNanos) {}

  private final LeaseClock clock;
  private final Map<String, Entry> leases = new HashMap<>();
  private final Map<String, Long> counters = new HashMap<>();

  public InMemoryLockBackend(LeaseClock clock) {
    this.clock = Objects.requireNonNull(clock, "clock");
  }

  public InMemoryLockBackend() {
    this(LeaseClock.system());
  }

  @Override
  public synchronized Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
    Entry current = leases.get(name);
    if (current != null && !expired(current)) {
      return Option.none();
    }
    FencingToken token = FencingToken.of(counters.merge(name, 1L, Long::sum));
    leases.put(name, new Entry(owner, token, clock.nanoTime() + ttl.toNanos()));
    return Option.some(token);
  }

  @Override
  public synchronized boolean renew(String name, String owner, FencingToken token, Duration ttl) {
    Entry current = leases.get(name);
    if (!isHeldBy(current, owner, token) || expired(current)) {
      return false;
    }
    leases.put(name, new Entry(owner, token, clock.nanoTime() + ttl.toNanos()));
    return true;
  }

  @Override
  public synchronized boolean release(String name, String owner, FencingToken token) {
    Entry current = leases.get(name);
    if (!isHeldBy(current, owner, token)) {
      return false;
    }
    leases.remove(name);
    return !expired(current);
  }

  @Override
  public synchronized Option<LeaseHolder> holder(String name) {
    return Option.of(leases.get(name))
        .filter(e -> !expired(e))
        .map(e -> new LeaseHolder(e.owner(), e.token()));
  }

  /** The stored lease of {@code name}, if any: the peek the contract suite uses. */
  public synchronized Option<StoredLease> peek(String name) {
    return Option.of(leases.get(name)).map(e -> new StoredLease(e.owner(), e.token(), expired(e)));
  }

  private boolean expired(Entry entry) {
    return clock.nanoTime() - entry.expiresAtNanos >= 0;
  }

  private static boolean isHeldBy(Entry entry, String owner, FencingToken token) {
    return entry != null && entry.owner().equals(owner) && entry.token().equals(token);
  }
}
