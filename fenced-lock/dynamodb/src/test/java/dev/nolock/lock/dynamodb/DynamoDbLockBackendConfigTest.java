package dev.nolock.lock.dynamodb;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.ManualLeaseClock;
import java.time.Duration;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.Test;

class DynamoDbLockBackendConfigTest {

  @Test
  void theDefaultsAreTheDocumentedTableKeyAndSystemClock() {
    DynamoDbLockBackendConfig config = DynamoDbLockBackendConfig.ofDefaults();

    assertThat(config.tableName()).isEqualTo("nolock_locks");
    assertThat(config.keyAttribute()).isEqualTo("lock_name");
    assertThat(config.clock().nanoTime()).isCloseTo(LeaseClock.system().nanoTime(), within());
  }

  @Test
  void badTableNamesAndKeyAttributesAreRefusedWithTheRule() {
    assertThatThrownBy(() -> DynamoDbLockBackendConfig.custom().tableName("a b"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("[a-zA-Z0-9_.-]");
    assertThatThrownBy(() -> DynamoDbLockBackendConfig.custom().keyAttribute(""))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> DynamoDbLockBackendConfig.custom().keyAttribute("token").build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("collides");
    assertThat(DynamoDbLockBackendConfig.custom().keyAttribute("name").build().keyAttribute())
        .as("a reserved word is fine")
        .isEqualTo("name");
  }

  @Test
  void theClockIsInjectedPerInstance() {
    ManualLeaseClock clock = new ManualLeaseClock(42);

    assertThat(DynamoDbLockBackendConfig.custom().clock(clock).build().clock()).isSameAs(clock);
    assertThatThrownBy(() -> DynamoDbLockBackendConfig.custom().clock(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("clock is null");
  }

  private static Offset<Long> within() {
    return Offset.offset(Duration.ofMinutes(1).toNanos());
  }
}
