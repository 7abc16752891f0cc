package dev.nolock.patterns;

/**
 * A protected write refused by a {@code dev.nolock.patterns.sql.Fence}: the fence had already
 * accepted a newer token for the lock, or the same token from another owner. Nothing the write
 * would have done was written.
 *
 * <p>The holder that gets this has lost its lease (whatever its own clock says) and must stop
 * writing; see {@link LeaseLostException}.
 *
 * @param lockName the lock whose fence refused the write
 * @param attemptedToken the token the write carried
 * @param attemptedOwner the owner the write carried
 * @param currentToken the highest token the fence has accepted
 * @param currentOwner the owner that wrote with {@code currentToken}
 */
public record FenceRejection(
    String lockName,
    FencingToken attemptedToken,
    String attemptedOwner,
    FencingToken currentToken,
    String currentOwner) {

  /** A message for logs. */
  public String describe() {
    return "Fence of lock \""
        + lockName
        + "\" refused token "
        + attemptedToken.value()
        + " from "
        + attemptedOwner
        + ": it already accepted token "
        + currentToken.value()
        + " from "
        + currentOwner
        + ". This holder has lost the lock; stop writing.";
  }
}
