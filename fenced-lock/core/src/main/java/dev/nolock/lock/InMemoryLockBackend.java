package dev.nolock.lock;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
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

  private record Entry(String owner, FencingToken token, Duration ttl, long expiresAtNanos) {}

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
    leases.put(name, new Entry(owner, token, ttl, clock.nanoTime() + ttl.toNanos()));
    return Option.some(token);
  }

  @Override
  public synchronized boolean renew(String name, String owner, FencingToken token, Duration ttl) {
    Entry current = leases.get(name);
    if (!isHeldBy(current, owner, token) || expired(current)) {
      return false;
    }
    leases.put(name, new Entry(owner, token, ttl, clock.nanoTime() + ttl.toNanos()));
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
    return inspect(name).flatMap(ObservedLease::liveHolder);
  }

  /**
   * The stored lease of {@code name}, if any (the peek the contract suite uses), expiry judged on
   * this backend's clock now: {@code waitLeft} is the time until its end. A released lease is no
   * longer stored; an expired one is, until the next grant replaces it. This backend keeps no
   * change marker, so the version is empty.
   */
  public synchronized Option<ObservedLease> inspect(String name) {
    long now = clock.nanoTime();
    return Option.of(leases.get(name))
        .map(
            e ->
                new ObservedLease(
                    Option.some(new LeaseHolder(e.owner(), e.token())),
                    Option.none(),
                    Option.some(e.ttl()),
                    expired(e, now) ? Duration.ZERO : Duration.ofNanos(e.expiresAtNanos() - now)));
  }

  private boolean expired(Entry entry) {
    return expired(entry, clock.nanoTime());
  }

  private static boolean expired(Entry entry, long nowNanos) {
    return nowNanos - entry.expiresAtNanos >= 0;
  }

  private static boolean isHeldBy(Entry entry, String owner, FencingToken token) {
    return entry != null && entry.owner().equals(owner) && entry.token().equals(token);
  }
}
