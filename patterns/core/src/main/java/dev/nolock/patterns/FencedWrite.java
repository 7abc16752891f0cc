package dev.nolock.patterns;

/**
 * What a fenced write that carried a {@link WriteId} did when the fence did not refuse it (see
 * {@code dev.nolock.patterns.sql.Fence.write}): either this call ran the writes and committed them
 * ({@link Applied}), or an earlier call with the same lock name and write id had already committed
 * them and this one ran nothing ({@link AlreadyWritten}). A stale lease whose write id is not
 * recorded is neither: that is a {@link FenceRejection}.
 *
 * @param <T> the result type of the caller's writes
 */
public sealed interface FencedWrite<T> permits FencedWrite.Applied, FencedWrite.AlreadyWritten {

  /** The write id the call carried. */
  WriteId writeId();

  /**
   * True when an earlier call with this lock name and write id had committed and this call ran
   * nothing.
   */
  default boolean alreadyWritten() {
    return this instanceof AlreadyWritten;
  }

  /**
   * This call ran the writes and committed them together with the fence's advance and the record of
   * its write id.
   *
   * @param writeId the write id the call carried, now recorded for the lock
   * @param result what the caller's writes returned
   */
  record Applied<T>(WriteId writeId, T result) implements FencedWrite<T> {}

  /**
   * An earlier call with the same lock name and write id had committed (typically one whose {@code
   * COMMIT} answer was lost with its connection), under the grant named here, which may be an
   * earlier grant than this call's; this call ran nothing and wrote nothing.
   *
   * <p>It says nothing about this call's lease: the fence was not asked. The caller's next write
   * tells whether the lease still holds the fence. Inside the caller's own transaction, roll that
   * transaction back, as on a {@link FenceRejection}.
   *
   * @param lockName the lock whose fence recognised the write id
   * @param token the token of the grant that wrote it
   * @param owner the owner of the grant that wrote it
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
