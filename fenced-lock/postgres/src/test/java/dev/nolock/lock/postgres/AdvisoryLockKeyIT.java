package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.sql.AdvisoryLockNamespace;
import dev.nolock.testkit.HeldAdvisoryLock;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.vavr.control.Option;
import java.util.UUID;
import org.jooq.DSLContext;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * {@link PostgresAdvisoryLock}'s keys are in nolock's namespace: another application's advisory
 * lock on the bare key ({@code hashtextextended('invoice-42', 0)}, the key before the namespace
 * existed) does not refuse it, while a holder of nolock's own key does. That two callers of the
 * same key exclude each other is {@link AdvisoryLockScenarios}'s.
 */
@ExtendWith(PostgresExtension.class)
class AdvisoryLockKeyIT {

  private final PostgresSchema schema;
  private final DSLContext dsl;
  private final String key = "invoice-" + UUID.randomUUID();

  AdvisoryLockKeyIT(PostgresSchema schema) {
    this.schema = schema;
    this.dsl = schema.dsl();
  }

  @Test
  void anAdvisoryLockOnTheBareKeyDoesNotRefuseIt() throws Exception {
    try (HeldAdvisoryLock other = HeldAdvisoryLock.hold(schema.jdbcUrl(), key)) {
      assertThat(PostgresAdvisoryLock.tryInTransaction(dsl, key, tx -> "ran"))
          .as("while another transaction holds hashtextextended('%s', 0)", key)
          .isEqualTo(Option.some("ran"));
    }
  }

  /** The negative control: a holder of nolock's key for the same name refuses it. */
  @Test
  void aHolderOfNolocksKeyRefusesIt() throws Exception {
    try (HeldAdvisoryLock same = HeldAdvisoryLock.hold(schema.jdbcUrl(), "nolock.lock:" + key)) {
      assertThat(PostgresAdvisoryLock.tryInTransaction(dsl, key, tx -> "ran"))
          .as("while another transaction holds nolock's key for %s", key)
          .isEqualTo(Option.none());
    }
  }

  /** Interoperation: the bare namespace is the old key, so code that locks it is excluded. */
  @Test
  void unnamespacedIsExcludedByAHolderOfTheBareKey() throws Exception {
    try (HeldAdvisoryLock legacy = HeldAdvisoryLock.hold(schema.jdbcUrl(), key)) {
      assertThat(
              PostgresAdvisoryLock.tryInTransaction(
                  dsl, AdvisoryLockNamespace.unnamespaced(), key, tx -> "ran"))
          .isEqualTo(Option.none());
    }
  }

  /** An application's namespace excludes its own framing and nothing of nolock's. */
  @Test
  void anApplicationsNamespaceIsExcludedOnlyByItsOwnFraming() throws Exception {
    AdvisoryLockNamespace billing = AdvisoryLockNamespace.of("billing");
    try (HeldAdvisoryLock app = HeldAdvisoryLock.hold(schema.jdbcUrl(), "billing:" + key)) {
      assertThat(PostgresAdvisoryLock.tryInTransaction(dsl, billing, key, tx -> "ran"))
          .isEqualTo(Option.none());
      assertThat(PostgresAdvisoryLock.tryInTransaction(dsl, key, tx -> "ran"))
          .as("nolock's namespace")
          .isEqualTo(Option.some("ran"));
    }
  }
}
