package dev.nolock.lock.etcd;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.Names;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.KeyValue;
import io.etcd.jetcd.common.exception.ErrorCode;
import io.etcd.jetcd.common.exception.EtcdException;
import io.etcd.jetcd.kv.GetResponse;
import io.etcd.jetcd.kv.TxnResponse;
import io.etcd.jetcd.op.Cmp;
import io.etcd.jetcd.op.CmpTarget;
import io.etcd.jetcd.op.Op;
import io.etcd.jetcd.options.DeleteOption;
import io.etcd.jetcd.options.GetOption;
import io.etcd.jetcd.options.PutOption;
import io.vavr.control.Option;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

/**
 * A {@link LockBackend} on etcd: a consensus-backed lease, the kind of lock service recommended
 * when a lock matters for correctness (Martin Kleppmann, <a
 * href="https://martin.kleppmann.com/2016/02/08/how-to-do-distributed-locking.html">How to do
 * distributed locking</a>, 2016: "use a proper consensus system", together with fencing tokens). A
 * grant is agreed by a Raft majority before etcd answers, so a failover cannot lose it the way an
 * asynchronous Redis replica can.
 *
 * <p>Algorithm:
 *
 * <ol>
 *   <li>Acquire: grant a new etcd lease of {@code ceil(ttl)} seconds for this holder, then one
 *       transaction: if the lock key's create revision is 0 (absent), put it with the holder as
 *       value, bound to that lease. The transaction's revision is the key's create revision: the
 *       {@link FencingToken}, strictly increasing across the whole cluster, across releases and
 *       expiries. On refusal, revoke the unused lease.
 *   <li>Renew: only this backend instance knows the holder's lease. For the same TTL, a transaction
 *       checks that the key still has this create revision and owner (a compare-and-swap on the
 *       token) and reads which lease it lives on; if that is the grant's lease, it is kept alive
 *       with {@code keepAliveOnce}, whose "lease not found" means the lease is lost. For a
 *       different TTL, the key is re-bound to a new lease in the same compare. A holder can never
 *       extend someone else's key, because keys live and die with their own lease.
 *   <li>A renew whose re-binding transaction fails (its answer may be lost after etcd applied it)
 *       reads the key: on the new lease, the renewal happened (true); no longer ours, false; still
 *       on the old lease, or unreadable, "outcome unknown" — and if unreadable the new lease is
 *       revoked, deleting the key if the put landed. A key found on a lease other than the grant's
 *       (that revoke failed too) is never reported renewed: "outcome unknown" until it expires.
 *   <li>Release: delete the key only if its create revision and owner are still ours. Then,
 *       whatever the answer (deleted, refused, or failed), forget the grant and revoke its lease,
 *       waiting up to {@code rpcTimeout} for etcd; a failed revoke only leaves the lease to expire.
 * </ol>
 *
 * A call whose request or answer is lost (a failed or timed-out etcd call) throws {@link
 * BackendUnavailableException}, meaning "outcome unknown", unless the renew above learns the
 * outcome; it never answers a false refusal. jetcd resends neither a transaction nor a {@code
 * keepAliveOnce} after a dropped connection. A call interrupted while it waits for etcd throws
 * {@link BackendUnavailableException} too (a renewal is not reported as lost) and leaves the
 * thread's interrupt flag set.
 *
 * <p>Every call validates the lock name and owner itself (not blank, at most 255 characters, no
 * control characters) and throws {@link IllegalArgumentException} before anything is sent. The key
 * of a lock is {@link EtcdLockConfig#lockKey}: names and prefixes never share a key.
 *
 * <p>Expiry is decided by etcd's leader on its own clock; etcd rounds TTLs up to whole seconds and
 * enforces a minimum (about 1.5 s with default timing), so the server may hold a lease longer than
 * the holder counts, never shorter. What etcd cannot do without a fence: stop a holder that was
 * paused past its lease from writing; hand the token to the resource.
 */
public final class EtcdLockBackend implements LockBackend {

  private record Grant(String name, String owner, long token) {}

  private record Held(long leaseId, long seconds) {}

  private final Client client;
  private final EtcdLockConfig config;
  private final ConcurrentMap<Grant, Held> leases = new ConcurrentHashMap<>();

  private EtcdLockBackend(Client client, EtcdLockConfig config) {
    this.client = Objects.requireNonNull(client, "client");
    this.config = Objects.requireNonNull(config, "config");
  }

  /** A backend on {@code client}, which the caller keeps owning. */
  public static EtcdLockBackend create(Client client, EtcdLockConfig config) {
    return new EtcdLockBackend(client, config);
  }

  /** A backend with {@link EtcdLockConfig#ofDefaults()}. */
  public static EtcdLockBackend create(Client client) {
    return create(client, EtcdLockConfig.ofDefaults());
  }

  public EtcdLockConfig config() {
    return config;
  }

  @Override
  public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
    requireNameAndOwner(name, owner);
    long seconds = seconds(ttl);
    long leaseId = await(name, "grant a lease", client.getLeaseClient().grant(seconds)).getID();
    ByteSequence key = key(name);
    TxnResponse txn =
        await(
            name,
            "acquire",
            client
                .getKVClient()
                .txn()
                .If(new Cmp(key, Cmp.Op.EQUAL, CmpTarget.createRevision(0)))
                .Then(Op.put(key, bytes(owner), PutOption.builder().withLeaseId(leaseId).build()))
                .commit());
    if (!txn.isSucceeded()) {
      revokeQuietly(leaseId);
      return Option.none();
    }
    long token = txn.getHeader().getRevision();
    leases.put(new Grant(name, owner, token), new Held(leaseId, seconds));
    return Option.some(FencingToken.of(token));
  }

  @Override
  public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
    requireNameAndOwner(name, owner);
    Objects.requireNonNull(token, "token");
    Grant grant = new Grant(name, owner, token.value());
    Held held = leases.get(grant);
    if (held == null) {
      return false; // not granted to this owner through this instance: it holds no such lease
    }
    long seconds = seconds(ttl);
    if (seconds == held.seconds()) {
      Option<Long> keyLease = leaseIfOurs(name, owner, token);
      if (keyLease.isEmpty()) {
        forget(grant, held);
        return false;
      }
      if (keyLease.get() != held.leaseId()) {
        // Only a re-bind whose answer was lost and whose new lease could not be revoked does
        // this: the key lives on a lease this instance does not keep alive, until it expires.
        throw new BackendUnavailableException(
            "etcd holds lock \""
                + name
                + "\" on a lease that an earlier renewal, whose answer was lost, bound it to; it"
                + " cannot be renewed and ends with that lease. Whether the grant still stands is"
                + " unknown; retry later.",
            null);
      }
      try {
        long left =
            client
                .getLeaseClient()
                .keepAliveOnce(held.leaseId())
                .get(config.rpcTimeout().toMillis(), TimeUnit.MILLISECONDS)
                .getTTL();
        if (left > 0) {
          return true;
        }
      } catch (ExecutionException e) {
        // etcd answers an expired lease with TTL 0, which jetcd reports as NOT_FOUND: the lease
        // is lost. Anything else (a dropped connection: UNAVAILABLE, which jetcd does not resend
        // for keepAliveOnce) says nothing about the lease.
        if (!(e.getCause() instanceof EtcdException etcd
            && etcd.getErrorCode() == ErrorCode.NOT_FOUND)) {
          throw unavailable(name, "renew", e);
        }
      } catch (TimeoutException e) {
        throw unavailable(name, "renew", e);
      } catch (InterruptedException e) {
        // Whoever interrupted must still see it; the lease is not known to be lost.
        Thread.currentThread().interrupt();
        throw unavailable(name, "renew", e);
      }
      forget(grant, held);
      return false;
    }
    long newLease = await(name, "grant a lease", client.getLeaseClient().grant(seconds)).getID();
    boolean rebound;
    try {
      rebound =
          await(
                  name,
                  "renew",
                  client
                      .getKVClient()
                      .txn()
                      .If(ours(name, owner, token))
                      .Then(
                          Op.put(
                              key(name),
                              bytes(owner),
                              PutOption.builder().withLeaseId(newLease).build()))
                      .commit())
              .isSucceeded();
    } catch (BackendUnavailableException unknown) {
      rebound = landed(name, owner, token, newLease, unknown);
    }
    if (!rebound) {
      revokeQuietly(newLease);
      forget(grant, held);
      return false;
    }
    if (!leases.replace(grant, held, new Held(newLease, seconds))) {
      // Released meanwhile: the release revoked the old lease; the key must not outlive it.
      revokeQuietly(newLease);
      return false;
    }
    revokeQuietly(held.leaseId());
    return true;
  }

  /**
   * Deletes the key if it is still this grant's, and in every case (deleted, refused, or failed)
   * forgets the grant and revokes its etcd lease: the caller is done with the grant, and an
   * unrevoked lease would only hold on to a key that should be gone. Revoking the lease also
   * deletes a key still bound to it, so a release whose delete failed still frees the lock when the
   * revoke gets through. A key bound to another grant's lease is never touched.
   */
  @Override
  public boolean release(String name, String owner, FencingToken token) {
    requireNameAndOwner(name, owner);
    Objects.requireNonNull(token, "token");
    Held held = leases.remove(new Grant(name, owner, token.value()));
    try {
      return await(
              name,
              "release",
              client
                  .getKVClient()
                  .txn()
                  .If(ours(name, owner, token))
                  .Then(Op.delete(key(name), DeleteOption.DEFAULT))
                  .commit())
          .isSucceeded();
    } finally {
      if (held != null) {
        revokeAndWait(held.leaseId());
      }
    }
  }

  /** A GET of the key: etcd deletes it when its lease expires, so present = held. */
  @Override
  public Option<LeaseHolder> holder(String name) {
    GetResponse got = await(name, "read the holder", client.getKVClient().get(key(name)));
    return Option.ofOptional(got.getKvs().stream().findFirst())
        .map(
            kv ->
                new LeaseHolder(
                    kv.getValue().toString(StandardCharsets.UTF_8),
                    FencingToken.of(kv.getCreateRevision())));
  }

  /**
   * After a re-binding transaction that failed (its answer may have been lost after etcd applied
   * it), reads where the key lives to learn whether the put landed.
   *
   * @return true if the key is ours on {@code newLease}, false if it is no longer ours
   * @throws BackendUnavailableException {@code unknown}, when the key is still ours on its old
   *     lease (this renewal did not happen) or etcd cannot tell
   */
  private boolean landed(
      String name,
      String owner,
      FencingToken token,
      long newLease,
      BackendUnavailableException unknown) {
    Option<Long> keyLease;
    try {
      keyLease = leaseIfOurs(name, owner, token);
    } catch (BackendUnavailableException stillUnknown) {
      // A key left on the new lease would live on a lease this instance does not keep alive, and
      // renewals of the old one would answer true over a key about to expire. Revoking the new
      // lease deletes such a key (the next renew then answers false) and is a no-op otherwise.
      revokeAndWait(newLease);
      throw unknown;
    }
    if (keyLease.contains(newLease)) {
      return true;
    }
    if (keyLease.isDefined()) {
      revokeQuietly(newLease);
      throw unknown;
    }
    return false;
  }

  /** The id of the lease the key lives on, if the key is still this grant's. */
  private Option<Long> leaseIfOurs(String name, String owner, FencingToken token) {
    TxnResponse txn =
        await(
            name,
            "renew",
            client
                .getKVClient()
                .txn()
                .If(ours(name, owner, token))
                .Then(Op.get(key(name), GetOption.DEFAULT))
                .commit());
    if (!txn.isSucceeded()) {
      return Option.none();
    }
    return Option.ofOptional(
        txn.getGetResponses().stream()
            .flatMap(got -> got.getKvs().stream())
            .findFirst()
            .map(KeyValue::getLease));
  }

  private Cmp[] ours(String name, String owner, FencingToken token) {
    ByteSequence key = key(name);
    return new Cmp[] {
      new Cmp(key, Cmp.Op.EQUAL, CmpTarget.createRevision(token.value())),
      new Cmp(key, Cmp.Op.EQUAL, CmpTarget.value(bytes(owner)))
    };
  }

  private void forget(Grant grant, Held held) {
    if (leases.remove(grant, held)) {
      revokeQuietly(held.leaseId());
    }
  }

  /**
   * Best effort, like {@link #revokeQuietly}, but waits up to {@code rpcTimeout} for etcd's answer,
   * so that a released lease is gone when {@code release} returns. Never throws; keeps an
   * interrupt.
   */
  private void revokeAndWait(long leaseId) {
    try {
      client
          .getLeaseClient()
          .revoke(leaseId)
          .get(config.rpcTimeout().toMillis(), TimeUnit.MILLISECONDS);
    } catch (ExecutionException | TimeoutException e) {
      // The lease then lives out its TTL; nothing else depends on it.
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }

  private void revokeQuietly(long leaseId) {
    // Best effort: an unrevoked lease only lives out its TTL.
    client.getLeaseClient().revoke(leaseId).exceptionally(e -> null);
  }

  private ByteSequence key(String name) {
    return bytes(config.lockKey(name));
  }

  /**
   * Checked before anything is sent: etcd would store a blank or control-character name or owner as
   * given, and the facade is not the only caller.
   */
  private void requireNameAndOwner(String name, String owner) {
    config.lockKey(name);
    Names.requireName("lease owner", owner, Lease.MAX_OWNER_LENGTH);
  }

  private static ByteSequence bytes(String s) {
    return ByteSequence.from(s, StandardCharsets.UTF_8);
  }

  /**
   * etcd leases are whole seconds; round up (from the whole {@code ttl}, nanoseconds included) so
   * the server never holds less than the holder counts.
   */
  private static long seconds(Duration ttl) {
    long seconds = ttl.getSeconds();
    return Math.max(1, ttl.getNano() == 0 ? seconds : seconds + 1);
  }

  private <T> T await(String name, String what, CompletableFuture<T> call) {
    try {
      return call.get(config.rpcTimeout().toMillis(), TimeUnit.MILLISECONDS);
    } catch (ExecutionException | TimeoutException e) {
      throw unavailable(name, what, e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw unavailable(name, what, e);
    }
  }

  private static BackendUnavailableException unavailable(String name, String what, Exception e) {
    Throwable cause = e instanceof ExecutionException && e.getCause() != null ? e.getCause() : e;
    return new BackendUnavailableException(
        "etcd could not "
            + what
            + " for lock \""
            + name
            + "\" ("
            + cause
            + "). Whether it took"
            + " effect is unknown; retry later.",
        cause);
  }

  @Override
  public String toString() {
    return "EtcdLockBackend[" + config + "]";
  }
}
