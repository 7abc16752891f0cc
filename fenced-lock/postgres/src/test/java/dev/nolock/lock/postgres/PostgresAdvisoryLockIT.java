package dev.nolock.lock.postgres;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import org.jooq.DSLContext;
import org.junit.jupiter.api.extension.ExtendWith;

/** The advisory-lock scenarios on direct connections to PostgreSQL. */
@ExtendWith(PostgresExtension.class)
class PostgresAdvisoryLockIT extends AdvisoryLockScenarios {

  private final DSLContext dsl;

  PostgresAdvisoryLockIT(PostgresSchema schema) {
    this.dsl = schema.dsl();
  }

  @Override
  protected DSLContext dsl() {
    return dsl;
  }
}
