package dev.nolock.lock.redis;

import dev.nolock.patterns.CoordinationException;
import java.util.Objects;
import java.util.Optional;

/**
 * A {@link RedisFence} refused a write because it cannot vouch for what it accepted before: its
 * state is not seeded on the Redis server process it reached. Nothing this call sent is stored on
 * that server now.
 *
 * <p>Either the state is gone ({@link Reason#NO_STATE}: the fence was never seeded, or Redis lost
 * it in a restart without persistence, a {@code FLUSHALL}/{@code FLUSHDB}, an eviction, or a
 * failover to a replica that lacks it), or it was seeded on another server process ({@link
 * Reason#SEEDED_ON_ANOTHER_SERVER}: Redis restarted or failed over since, and what survived may be
 * behind what the fence had accepted). A fence that went back in time would let a stale holder
 * write after a newer one, so every write under the fence's key prefix is refused, whoever sends
 * it, until an operator seeds the fence again.
 *
 * <p>The caller's action: <b>stop writing</b> (as after a {@link
 * dev.nolock.patterns.FenceRejection}) and alert an operator. The operator re-seeds with {@link
 * RedisFence#seed(long)}, passing a floor at or above the highest token any holder may still write
 * with, or, only when nothing can have been lost, calls {@link
 * RedisFence#resumeWithSurvivingState()}. An earlier send of this same write (Lettuce resends after
 * a reconnect) may have been applied before the loss; it was lost with it.
 */
public final class FenceNotSeededException extends CoordinationException {

  private static final long serialVersionUID = 1L;

  /** Why the fence cannot vouch for its state. */
  public enum Reason {
    /** The server has no seeded state under the fence's key prefix. */
    NO_STATE,
    /** The state was seeded on another server process: a restart or a failover since. */
    SEEDED_ON_ANOTHER_SERVER
  }

  private final Reason reason;
  private final String lockName;
  private final String seededRunId;
  private final String serverRunId;

  FenceNotSeededException(
      Reason reason, String lockName, String stateKey, String seededRunId, String serverRunId) {
    super(message(reason, lockName, stateKey, seededRunId, serverRunId));
    this.reason = Objects.requireNonNull(reason, "reason");
    this.lockName = Objects.requireNonNull(lockName, "lockName");
    this.seededRunId = seededRunId;
    this.serverRunId = serverRunId;
  }

  public Reason reason() {
    return reason;
  }

  /** The lock whose write was refused (every lock under the same fence is refused alike). */
  public String lockName() {
    return lockName;
  }

  /** The {@code run_id} the state was seeded on; empty for {@link Reason#NO_STATE}. */
  public Optional<String> seededRunId() {
    return Optional.ofNullable(seededRunId);
  }

  /** The {@code run_id} of the server that refused; empty for {@link Reason#NO_STATE}. */
  public Optional<String> serverRunId() {
    return Optional.ofNullable(serverRunId);
  }

  private static String message(
      Reason reason, String lockName, String stateKey, String seededRunId, String serverRunId) {
    String what =
        reason == Reason.NO_STATE
            ? "Redis has no seeded fence state at \""
                + stateKey
                + "\": the fence was never seeded, or Redis lost it (a restart without"
                + " persistence, FLUSHALL/FLUSHDB, an eviction, a failover to a replica that lacks"
                + " it)"
            : "the fence state at \""
                + stateKey
                + "\" was seeded on Redis run_id "
                + seededRunId
                + " but this server is run_id "
                + serverRunId
                + ": Redis restarted or failed over since, and the state may be behind what the"
                + " fence accepted";
    return "RedisFence refused the write of lock \""
        + lockName
        + "\" and will refuse every write until it is seeded again: "
        + what
        + ". Nothing of this write is stored. Stop writing and have an operator call"
        + " RedisFence.seed(floor) with a floor at or above the highest token any holder may still"
        + " write with (or resumeWithSurvivingState() when Redis provably lost nothing); see"
        + " \"Re-seeding the fence\" in the nolock-fenced-lock-redis README.";
  }
}
