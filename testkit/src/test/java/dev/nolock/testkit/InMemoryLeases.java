package dev.nolock.testkit;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

/**
 * A correct lease per name in memory, expiry on {@link System#nanoTime()}: the properties' subject.
 */
final class InMemoryLeases implements LockBackend {

  private record Stored(String owner, long token, long expiresAt) {
    boolean expired(long now) {
      return now - expiresAt >= 0;
    }

    Duration waitLeft(long now) {
      return expired(now) ? Duration.ZERO : Duration.ofNanos(expiresAt - now);
    }
  }

  private final Map<String, Stored> leases = new HashMap<>();
  private final Map<String, Long> counters = new HashMap<>();

  @Override
  public synchronized Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
    long now = System.nanoTime();
    Stored held = leases.get(name);
    if (held != null && !held.expired(now)) {
      if (held.owner().equals(owner)) {
        leases.put(name, new Stored(owner, held.token(), now + ttl.toNanos()));
        return Option.some(FencingToken.of(held.token()));
      }
      return Option.none();
    }
    long token = counters.merge(name, 1L, Long::sum);
    leases.put(name, new Stored(owner, token, now + ttl.toNanos()));
    return Option.some(FencingToken.of(token));
  }

  @Override
  public synchronized boolean renew(String name, String owner, FencingToken token, Duration ttl) {
    long now = System.nanoTime();
    Stored held = leases.get(name);
    if (held == null || held.expired(now) || !isGrant(held, owner, token)) {
      return false;
    }
    leases.put(name, new Stored(owner, held.token(), now + ttl.toNanos()));
    return true;
  }

  @Override
  public synchronized boolean release(String name, String owner, FencingToken token) {
    long now = System.nanoTime();
    Stored held = leases.get(name);
    if (held == null || held.expired(now) || !isGrant(held, owner, token)) {
      return false;
    }
    leases.put(name, new Stored(owner, held.token(), now));
    return true;
  }

  @Override
  public synchronized Option<LeaseHolder> holder(String name) {
    return peek(name).flatMap(ObservedLease::liveHolder);
  }

  synchronized Option<ObservedLease> peek(String name) {
    long now = System.nanoTime();
    return Option.of(leases.get(name))
        .map(
            held ->
                new ObservedLease(
                    Option.some(new LeaseHolder(held.owner(), FencingToken.of(held.token()))),
                    Option.none(),
                    Option.none(),
                    held.waitLeft(now)));
  }

  private static boolean isGrant(Stored held, String owner, FencingToken token) {
    return held.owner().equals(owner) && held.token() == token.value();
  }
}
