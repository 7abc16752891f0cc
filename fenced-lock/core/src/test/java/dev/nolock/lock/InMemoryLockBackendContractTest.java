package dev.nolock.lock;

import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.LockBackendContract;
import io.vavr.control.Option;

class InMemoryLockBackendContractTest extends LockBackendContract {

  private final InMemoryLockBackend backend = new InMemoryLockBackend();

  @Override
  protected LockBackend backend() {
    return backend;
  }

  @Override
  protected Option<ObservedLease> peek(String name) {
    return backend.inspect(name);
  }
}
