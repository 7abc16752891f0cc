package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.sql.AdvisoryLockNamespace;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

class PostgresAdvisoryLockTest {

  /** Not connected: a refused key never reaches the database. */
  private final DSLContext detached = DSL.using(SQLDialect.POSTGRES);

  @Test
  void aBlankKeyIsRefusedWithHowToFixIt() {
    assertThatThrownBy(() -> PostgresAdvisoryLock.tryInTransaction(detached, " ", tx -> 1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("advisory lock key")
        .hasMessageContaining("non-empty");
  }

  @Test
  void aKeyWithAControlCharacterIsRefused() {
    assertThatThrownBy(() -> PostgresAdvisoryLock.tryInTransaction(detached, "a\nb", tx -> 1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("control character");
  }

  @Test
  void anOverlongKeyIsRefused() {
    String key = "k".repeat(PostgresAdvisoryLock.MAX_KEY_LENGTH + 1);

    assertThatThrownBy(() -> PostgresAdvisoryLock.tryInTransaction(detached, key, tx -> 1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("characters long");
  }

  @Test
  void aNullNamespaceIsRefusedWithHowToFixIt() {
    assertThatThrownBy(
            () -> PostgresAdvisoryLock.tryInTransaction(detached, null, "invoice-42", tx -> 1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("namespace is null")
        .hasMessageContaining("AdvisoryLockNamespace.LOCK");
  }

  @Test
  void aNullDslOrWorkIsRefusedLikeANullNamespace() {
    assertThatThrownBy(() -> PostgresAdvisoryLock.tryInTransaction(null, "invoice-42", tx -> 1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("dsl is null")
        .hasMessageContaining("DSLContext");
    assertThatThrownBy(
            () ->
                PostgresAdvisoryLock.<Integer, RuntimeException>tryInTransaction(
                    detached, "invoice-42", null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("work is null");
  }

  @Test
  void aNullKeyIsRefusedWithHowToFixIt() {
    assertThatThrownBy(() -> PostgresAdvisoryLock.tryInTransaction(detached, null, tx -> 1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("advisory lock key is null");
  }

  /** Refused before a transaction: {@code detached} would fail to start one otherwise. */
  @Test
  void anUnnamespacedKeyFramedAsNolocksOwnIsRefusedBeforeATransaction() {
    assertThatThrownBy(
            () ->
                PostgresAdvisoryLock.tryInTransaction(
                    detached,
                    AdvisoryLockNamespace.unnamespaced(),
                    "nolock.schedule.claims:public.runs/report",
                    tx -> 1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("reserved for nolock");
  }
}
