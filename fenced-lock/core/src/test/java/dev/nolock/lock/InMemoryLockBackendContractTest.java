package dev.nolock.lock;

import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.LockBackendContract;
import dev.nolock.testkit.PeekedLease;
import java.util.Optional;

class InMemoryLockBackendContractTest extends LockBackendContract {

  private final InMemoryLockBackend backend = new InMemoryLockBackend();

  @Override
  protected LockBackend backend() {
    return backend;
  }

  @Override
  protected Optional<PeekedLease> peek(String name) {
    return backend
        .peek(name)
        .map(s -> new PeekedLease(s.owner(), s.token(), s.expired()))
        .toJavaOptional();
  }
}
