package dev.nolock.patterns;

/**
 * A number that strictly increases with every grant of a lock, a lease or a claim, and that the
 * protected resource checks before it accepts a write.
 *
 * <p>Guarantee: the backend that issued two tokens for the same name issued the larger one later.
 * The resource that remembers the highest token it has accepted can therefore refuse a holder whose
 * lease ran out while it was paused (GC, SIGSTOP, a network stall): that holder's token is lower
 * than the one the next holder already wrote with. See {@code dev.nolock.patterns.sql.Fence}.
 *
 * <p>Every backend hands out this one type: a PostgreSQL counter, a Redis {@code INCR}, an etcd
 * create revision, a DynamoDB counter attribute, a Kubernetes {@code leaseTransitions}. Tokens
 * start at 1; zero and negative values are refused because a backend that returns them has not
 * bumped its counter, and a resource's "no token seen yet" is zero.
 *
 * @param value the token, at least 1
 */
public record FencingToken(long value) implements Comparable<FencingToken> {

  public FencingToken {
    if (value <= 0) {
      throw new IllegalArgumentException(
          "A fencing token must be at least 1, got "
              + value
              + ": tokens come from a counter that"
              + " the backend bumps with every grant, and 0 means 'no token seen' at the resource."
              + " Pass the value the backend returned for this grant.");
    }
  }

  /** The token with this value; same as the constructor, for call sites that read better. */
  public static FencingToken of(long value) {
    return new FencingToken(value);
  }

  /** True when this token was issued after {@code other} for the same name. */
  public boolean isNewerThan(FencingToken other) {
    return compareTo(other) > 0;
  }

  @Override
  public int compareTo(FencingToken other) {
    return Long.compare(value, other.value);
  }

  @Override
  public String toString() {
    return "FencingToken[" + value + "]";
  }
}
