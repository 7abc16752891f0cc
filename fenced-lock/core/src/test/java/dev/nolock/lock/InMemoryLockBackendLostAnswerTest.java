package dev.nolock.lock;

import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.LockBackendLostAnswerContract;
import dev.nolock.testkit.LostAnswerLockBackend;
import io.vavr.control.Option;
import java.time.Duration;

/**
 * The reference backend behind a connection that loses a request or an answer, with a client that
 * reports "outcome unknown" ({@link LostAnswerLockBackend.Mode#REPORTS}). An in-memory backend has
 * no transport that resends; see {@link InMemoryLockBackend} for what a resending one would need.
 */
class InMemoryLockBackendLostAnswerTest extends LockBackendLostAnswerContract {

  private final InMemoryLockBackend backend = new InMemoryLockBackend();
  private final LostAnswerLockBackend faulty =
      LostAnswerLockBackend.wrap(backend, LostAnswerLockBackend.Mode.REPORTS);

  @Override
  protected LockBackend backend() {
    return backend;
  }

  @Override
  protected LockBackend faultyBackend() {
    return faulty;
  }

  @Override
  protected Option<ObservedLease> peek(String name) {
    return backend.inspect(name);
  }

  @Override
  protected InjectedFault inject(Operation op, FaultKind kind, Runnable meanwhile) {
    return faulty.arm(op, kind, meanwhile);
  }

  // No network: a step takes microseconds, and a shorter TTL shortens the wait of the unknown
  // release whose request never arrived.
  @Override
  protected Duration ttl() {
    return Duration.ofSeconds(2);
  }
}
