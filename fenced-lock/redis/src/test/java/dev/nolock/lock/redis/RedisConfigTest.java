package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class RedisConfigTest {

  private final RedisLockBackendConfig lock = RedisLockBackendConfig.ofDefaults();
  private final RedisFenceConfig fence = RedisFenceConfig.ofDefaults();

  @Test
  void defaultKeysPutTheLockNameInAHashTag() {
    assertThat(lock.leaseKey("orders")).isEqualTo("nolock:lock:{orders}");
    assertThat(lock.counterKey("orders")).isEqualTo("nolock:lock:{orders}:token");
    assertThat(fence.stateKey()).isEqualTo("nolock:fence:state");
  }

  @Test
  void bracesAndPercentInLockNamesAreEscapedSoTheTagStaysWhole() {
    assertThat(lock.leaseKey("a{b}c")).isEqualTo("nolock:lock:{a%7Bb%7Dc}");
    assertThat(lock.leaseKey("}")).isEqualTo("nolock:lock:{%7D}");
    assertThat(lock.leaseKey("100%")).isEqualTo("nolock:lock:{100%25}");
  }

  @Test
  void distinctLockNamesNeverShareAKey() {
    List<String> names = List.of("a{b", "a%7Bb", "a%257Bb", "a", "a}:token", "a:token", "{a}");
    Set<String> keys = new HashSet<>();
    for (String name : names) {
      keys.add(lock.leaseKey(name));
      keys.add(lock.counterKey(name));
    }
    assertThat(keys).hasSize(names.size() * 2);
  }

  @Test
  void aCustomPrefixIsUsedAsGiven() {
    RedisLockBackendConfig custom = RedisLockBackendConfig.custom().keyPrefix("app:locks:").build();

    assertThat(custom.keyPrefix()).isEqualTo("app:locks:");
    assertThat(custom.leaseKey("x")).isEqualTo("app:locks:{x}");
  }

  @Test
  void prefixesThatWouldBreakTheHashTagOrAreBlankAreRefused() {
    assertThatThrownBy(() -> RedisLockBackendConfig.custom().keyPrefix("app:{locks}:"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("hash");
    assertThatThrownBy(() -> RedisFenceConfig.custom().keyPrefix("app}:"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> RedisLockBackendConfig.custom().keyPrefix(" "))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> RedisLockBackendConfig.custom().keyPrefix("app locks:"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("whitespace");
    assertThatThrownBy(() -> RedisLockBackendConfig.custom().keyPrefix("x".repeat(129)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void theFenceKnowsTheDefaultLockPrefixAndTakesAConfiguredOneValidatedLikeTheBackends() {
    assertThat(fence.lockKeyPrefix()).isEqualTo(RedisLockBackendConfig.DEFAULT_KEY_PREFIX);
    assertThat(RedisFenceConfig.custom().lockKeyPrefix("app:locks:").build().lockKeyPrefix())
        .isEqualTo("app:locks:");
    assertThatThrownBy(() -> RedisFenceConfig.custom().lockKeyPrefix("app:{locks}:"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("lock key prefix")
        .hasMessageContaining("hash");
    assertThatThrownBy(() -> RedisFenceConfig.custom().lockKeyPrefix(""))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void badLockNamesAreRefusedWithTheFix() {
    assertThatThrownBy(() -> lock.leaseKey(""))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("lock name");
    assertThatThrownBy(() -> lock.leaseKey("a\nb")).isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> lock.leaseKey("x".repeat(256)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void theFenceRemembersTenThousandWriteIdsByDefaultAndRefusesANumberOutOfRange() {
    assertThat(fence.rememberedWrites()).isEqualTo(10_000);
    assertThat(RedisFenceConfig.custom().rememberedWrites(1).build().rememberedWrites()).isOne();
    assertThat(RedisFenceConfig.custom().rememberedWrites(1_000_000).build().rememberedWrites())
        .isEqualTo(1_000_000);
    assertThatThrownBy(() -> RedisFenceConfig.custom().rememberedWrites(0))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("between 1 and 1000000, got 0");
    assertThatThrownBy(() -> RedisFenceConfig.custom().rememberedWrites(1_000_001))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("got 1000001");
  }
}
