package dev.nolock.lock.redis;

import dev.nolock.patterns.CoordinationException;
import io.vavr.control.Option;
import java.util.Objects;

/**
 * A {@link RedisFence} refused a write because it cannot vouch for what it accepted before: its
 * state is not established on the Redis server process, and replication history, it reached. This
 * send of the write changed nothing.
 *
 * <p>Either the state is gone ({@link Reason#NO_STATE}: the fence was never established, or Redis
 * lost it in a restart without persistence, a {@code FLUSHALL}/{@code FLUSHDB}, an eviction, or a
 * failover to a replica that lacks it), or it was established on another server process ({@link
 * Reason#ESTABLISHED_ON_ANOTHER_SERVER}: Redis restarted or failed over since, and what survived
 * may be behind what the fence had accepted), or on this process before its replication id changed
 * ({@link Reason#REPLICATION_ID_CHANGED}: it was a replica since and may hold a lagging copy). A
 * fence that went back in time would let a stale holder write after a newer one, so every write
 * under the fence's key prefix is refused, whoever sends it, until an operator establishes the
 * fence again.
 *
 * <p>The caller's action: <b>stop writing</b> (as after a {@link
 * dev.nolock.patterns.FenceRejection}) and alert an operator. The operator re-establishes with
 * {@link RedisFence#establish(long)}, passing a floor at or above the highest token any holder may
 * still write with, or, only when nothing can have been lost, calls {@link
 * RedisFence#resumeWithSurvivingState()}. If this call's answer was lost and Lettuce sent it again
 * (it does after a reconnect), an earlier send may have been applied before the state was lost:
 * whether this call's values are stored is then unknown.
 */
public final class FenceNotEstablishedException extends CoordinationException {

  private static final long serialVersionUID = 1L;

  /** Why the fence cannot vouch for its state. */
  public enum Reason {
    /** The server has no established state under the fence's key prefix. */
    NO_STATE,
    /** The state was established on another server process: a restart or a failover since. */
    ESTABLISHED_ON_ANOTHER_SERVER,
    /**
     * The state was established on this server process, but its replication id ({@code
     * master_replid}) changed since: the process was a replica and was promoted again (a failback,
     * whose full resync may have replaced the fence's state by a lagging copy), or, without any
     * loss, it got its first replica or freed its replication backlog after {@code
     * repl-backlog-ttl}.
     */
    REPLICATION_ID_CHANGED
  }

  private final Reason reason;
  private final String lockName;
  private final ServerIdentity established;
  private final ServerIdentity server;

  /**
   * The identity of a Redis server process and its replication history, as {@code INFO} shows it.
   *
   * @param runId {@code run_id} ({@code INFO server}): new for every process
   * @param replicationId {@code master_replid} ({@code INFO replication}); empty when a state
   *     established before the fence recorded it
   */
  public record ServerIdentity(String runId, String replicationId) {
    public ServerIdentity {
      Objects.requireNonNull(runId, "runId");
      Objects.requireNonNull(replicationId, "replicationId");
    }

    @Override
    public String toString() {
      return "run_id " + runId + ", master_replid " + replicationId;
    }
  }

  FenceNotEstablishedException(
      Reason reason,
      String lockName,
      String stateKey,
      ServerIdentity established,
      ServerIdentity server) {
    super(message(reason, lockName, stateKey, established, server));
    this.reason = Objects.requireNonNull(reason, "reason");
    this.lockName = Objects.requireNonNull(lockName, "lockName");
    this.established = established;
    this.server = server;
  }

  public Reason reason() {
    return reason;
  }

  /** The lock whose write was refused (every lock under the same fence is refused alike). */
  public String lockName() {
    return lockName;
  }

  /**
   * The server process and replication id the state was established on; empty for {@code NO_STATE}.
   */
  public Option<ServerIdentity> establishedOn() {
    return Option.of(established);
  }

  /** The server process and replication id that refused; empty for {@code NO_STATE}. */
  public Option<ServerIdentity> server() {
    return Option.of(server);
  }

  private static String message(
      Reason reason,
      String lockName,
      String stateKey,
      ServerIdentity established,
      ServerIdentity server) {
    String what =
        switch (reason) {
          case NO_STATE ->
              "Redis has no established fence state at \""
                  + stateKey
                  + "\": the fence was never established, or Redis lost it (a restart without"
                  + " persistence, FLUSHALL/FLUSHDB, an eviction, a failover to a replica that"
                  + " lacks it)";
          case ESTABLISHED_ON_ANOTHER_SERVER ->
              "the fence state at \""
                  + stateKey
                  + "\" was established on Redis "
                  + established
                  + " but this server is "
                  + server
                  + ": Redis restarted or failed over since, and the state may be behind what the"
                  + " fence accepted";
          case REPLICATION_ID_CHANGED ->
              "the fence state at \""
                  + stateKey
                  + "\" was established on this Redis process ("
                  + established
                  + ") but its replication id is now "
                  + server.replicationId()
                  + ": it was a replica and was promoted again since (a failback, whose resync may"
                  + " have replaced the state by a lagging copy), or, without a loss, it got its"
                  + " first replica or freed its backlog after repl-backlog-ttl";
        };
    return "RedisFence refused the write of lock \""
        + lockName
        + "\" and will refuse every write until it is established again: "
        + what
        + ". This send wrote nothing (if Lettuce resent it after a lost answer, an earlier send"
        + " may have been applied before the loss: unknown). Stop writing and have an operator"
        + " call RedisFence.establish(floor) with a floor at or above the highest token any holder"
        + " may still write with (or resumeWithSurvivingState() when Redis provably lost"
        + " nothing); see \"Re-establishing the fence\" in the nolock-fenced-lock-redis README.";
  }
}
