package dev.nolock.lock;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import io.vavr.control.Option;
import java.time.Duration;

/** A backend that passes every call on; a test overrides the one call it makes misbehave. */
public class ForwardingLockBackend implements LockBackend {

  private final LockBackend server;

  public ForwardingLockBackend(LockBackend server) {
    this.server = server;
  }

  @Override
  public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
    return server.tryAcquire(name, owner, ttl);
  }

  @Override
  public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
    return server.renew(name, owner, token, ttl);
  }

  @Override
  public boolean release(String name, String owner, FencingToken token) {
    return server.release(name, owner, token);
  }

  @Override
  public Option<LeaseHolder> holder(String name) {
    return server.holder(name);
  }
}
