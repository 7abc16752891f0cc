package dev.nolock.patterns;

/**
 * What a fenced write that carried a {@link WriteId} did when the fence let it through (see {@link
 * Fence#write(org.jooq.DSLContext, Lease, WriteId, java.util.function.Function)}): either this call
 * ran the writes and committed them ({@link Applied}), or an earlier call with the same lease and
 * write id had already committed them and this one ran nothing ({@link AlreadyWritten}). A stale
 * lease is neither: that is a {@link FenceRejection}.
 *
 * @param <T> the result type of the caller's writes
 */
public sealed interface FencedWrite<T> permits FencedWrite.Applied, FencedWrite.AlreadyWritten {

  /** The write id the call carried. */
  WriteId writeId();

  /**
   * True when an earlier call with this lease and write id had committed and this call ran nothing.
   */
  default boolean alreadyWritten() {
    return this instanceof AlreadyWritten;
  }

  /**
   * This call ran the writes and committed them together with the fence's advance.
   *
   * @param writeId the write id the call carried, now the fence's last write id for the lock
   * @param result what the caller's writes returned
   */
  record Applied<T>(WriteId writeId, T result) implements FencedWrite<T> {}

  /**
   * An earlier call with the same lock, token, owner and write id had committed (typically one
   * whose {@code COMMIT} answer was lost with its connection); this call ran nothing and wrote
   * nothing. The lease still holds the fence: the caller may go on writing under it.
   *
   * @param lockName the lock whose fence recognised the write id
   * @param token the token of the lease, equal to the fence's
   * @param owner the owner of the lease, equal to the fence's
   * @param writeId the write id recorded by the earlier call
   */
  record AlreadyWritten<T>(String lockName, FencingToken token, String owner, WriteId writeId)
      implements FencedWrite<T> {

    /** A message for logs. */
    public String describe() {
      return "Fence of lock \""
          + lockName
          + "\" already committed write \""
          + writeId.value()
          + "\" with token "
          + token.value()
          + " from "
          + owner
          + ": an earlier attempt of this write landed, so this one ran nothing.";
    }
  }
}
