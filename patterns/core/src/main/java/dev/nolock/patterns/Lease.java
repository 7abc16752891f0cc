package dev.nolock.patterns;

import java.util.Objects;

/**
 * What a holder received from a lock or lease backend: which lock, who holds it, the {@link
 * FencingToken} of this grant and the holder's {@link Deadline}.
 *
 * <p>The token and owner go with every protected write (see {@code dev.nolock.patterns.sql.Fence});
 * the deadline is checked before each one ({@link Deadline#checkPointOfNoReturn}). The owner
 * identifies one holder process uniquely (never just a host name: two processes on one host would
 * look alike), because the fence accepts an equal token only from the same owner.
 *
 * @param name the lock name
 * @param owner the unique identity of the holder
 * @param token the fencing token of this grant
 * @param deadline when the lease ends, as measured by the holder
 */
public record Lease(String name, String owner, FencingToken token, Deadline deadline) {

  /** Longest lock name any backend accepts. */
  public static final int MAX_NAME_LENGTH = 255;

  /** Longest owner identity any backend accepts. */
  public static final int MAX_OWNER_LENGTH = 255;

  public Lease {
    Names.requireName("lock name", name, MAX_NAME_LENGTH);
    Names.requireName("lease owner", owner, MAX_OWNER_LENGTH);
    Objects.requireNonNull(token, "token");
    Objects.requireNonNull(deadline, "deadline");
  }
}
