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
    assertThat(config.waitersTable()).isEqualTo("nolock_locks_waiters");
    assertThat(config.queryTimeout()).isEqualTo(Duration.ofSeconds(5));
    assertThat(config.listen()).isTrue();
  }

  /** The queue of waiters' table is the lease table's name plus "_waiters", itself a name. */
  @Test
  void aTableNameTooLongForItsQueueBesideItIsRefusedSayingWhy() {
    String longest = "t".repeat(63 - "_waiters".length());
    assertThat(PostgresLockConfig.custom().table("app." + longest).build().waitersTable())
        .isEqualTo("app." + longest + "_waiters");
    assertThatThrownBy(() -> PostgresLockConfig.custom().table(longest + "t"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("queue of waiters")
        .hasMessageContaining("shorten the lock table's name");
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
