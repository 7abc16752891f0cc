package dev.nolock.lock.usage;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.InMemoryLockBackend;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.patterns.FencingToken;
import java.time.Duration;
import org.junit.jupiter.api.Test;

/** Outside the lock's package, as a user's code is: what an EFFICIENCY holder may read. */
class EfficiencyLockTokenTest {

  @Test
  void anEfficiencyHolderReadsItsTokenForLogsButGetsNoFencingLease() {
    try (FencedLock lock =
        FencedLock.create(
            new InMemoryLockBackend(), LockConfig.ofDefaults(LockPurpose.EFFICIENCY))) {
      HeldLock held = lock.tryAcquire("cache-refresh", Duration.ofSeconds(3)).get();

      assertThat(held.token()).isEqualTo(FencingToken.of(1));
      assertThatThrownBy(held::lease)
          .as("negative control: still no lease for a fence")
          .isInstanceOf(IllegalStateException.class);
    }
  }
}
