package dev.nolock.testkit;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;

/**
 * A {@link LockBackend} decorator that loses the answer or the request of one armed operation, in
 * memory. An honest one reports a lost answer as {@link BackendUnavailableException}; a {@code
 * resending} one sends the request again itself and reports the resend's answer, as a client that
 * trusts its retry would: a resent release that already landed answers false.
 */
final class LostAnswerInMemory implements LockBackend {

  private final LockBackend real;
  private final boolean resending;
  private volatile Armed armed;

  private record Armed(
      LockBackendProperties.Operation op, FaultKind kind, Runnable meanwhile, AtomicBoolean shot)
      implements InjectedFault {
    @Override
    public boolean fired() {
      return shot.get();
    }
  }

  LostAnswerInMemory(LockBackend real, boolean resending) {
    this.real = real;
    this.resending = resending;
  }

  InjectedFault arm(LockBackendProperties.Operation op, FaultKind kind, Runnable meanwhile) {
    Armed fault = new Armed(op, kind, meanwhile, new AtomicBoolean());
    armed = fault;
    return fault;
  }

  @Override
  public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
    return send(LockBackendProperties.Operation.ACQUIRE, () -> real.tryAcquire(name, owner, ttl));
  }

  @Override
  public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
    return send(LockBackendProperties.Operation.RENEW, () -> real.renew(name, owner, token, ttl));
  }

  @Override
  public boolean release(String name, String owner, FencingToken token) {
    return send(LockBackendProperties.Operation.RELEASE, () -> real.release(name, owner, token));
  }

  @Override
  public Option<LeaseHolder> holder(String name) {
    return real.holder(name);
  }

  private <T> T send(LockBackendProperties.Operation op, Supplier<T> request) {
    Armed fault = armed;
    if (fault == null || fault.op() != op || !fault.shot().compareAndSet(false, true)) {
      return request.get();
    }
    armed = null;
    if (fault.kind() == FaultKind.ANSWER_LOST) {
      request.get();
    }
    fault.meanwhile().run();
    if (resending) {
      return request.get();
    }
    throw new BackendUnavailableException("injected: " + fault.kind() + " on " + op, null);
  }
}
