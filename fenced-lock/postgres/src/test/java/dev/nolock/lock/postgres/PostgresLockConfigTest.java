package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class PostgresLockConfigTest {

  @Test
  void defaultsAreTheDocumentedOnes() {
    PostgresLockConfig config = PostgresLockConfig.ofDefaults();

    assertThat(config.table()).isEqualTo("nolock_locks");
    assertThat(config.queryTimeout()).isEqualTo(Duration.ofSeconds(5));
  }

  @Test
  void aSchemaQualifiedTableIsAccepted() {
    assertThat(PostgresLockConfig.custom().table("app.nolock_locks").build().table())
        .isEqualTo("app.nolock_locks");
  }

  @ParameterizedTest
  @ValueSource(strings = {"nolock_locks; drop table x", "NolockLocks", "a.b.c", "1locks", " "})
  void aTableThatIsNotAPlainIdentifierIsRefusedWithHowToFixIt(String table) {
    assertThatThrownBy(() -> PostgresLockConfig.custom().table(table))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("lock table");
  }

  @Test
  void anUpperCaseTableIsRefusedBecausePostgresWouldFoldIt() {
    assertThatThrownBy(() -> PostgresLockConfig.custom().table("Locks"))
        .hasMessageContaining("[a-z_][a-z0-9_]*")
        .hasMessageContaining("lower case");
  }

  @ParameterizedTest
  @ValueSource(longs = {0, 500, 1500, 600_000})
  void aQueryTimeoutThatIsNotWholeSecondsInRangeIsRefused(long millis) {
    assertThatThrownBy(() -> PostgresLockConfig.custom().queryTimeout(Duration.ofMillis(millis)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("whole seconds");
  }
}
