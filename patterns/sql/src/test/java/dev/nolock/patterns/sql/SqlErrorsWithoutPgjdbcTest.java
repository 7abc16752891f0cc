package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.sql.SQLException;
import org.jooq.exception.DataAccessException;
import org.junit.jupiter.api.Test;

/**
 * {@link SqlErrors} without pgjdbc on the class path, as a user of another driver has it (the
 * dependency is optional). Run only by the pom's {@code without-pgjdbc} execution, which takes
 * pgjdbc off the test class path.
 */
class SqlErrorsWithoutPgjdbcTest {

  @Test
  void pgjdbcIsReallyAbsent() {
    assertThatThrownBy(() -> Class.forName("org.postgresql.util.PSQLException"))
        .isInstanceOf(ClassNotFoundException.class);
  }

  @Test
  void theMessageRulesWorkWithoutIt() {
    SQLException missing = new SQLException("ERROR: relation \"t\" does not exist", "42P01");
    assertThat(SqlErrors.serverMessage(new DataAccessException("failed", missing)))
        .isEqualTo("relation \"t\" does not exist");
    SQLException raised = new SQLException("ERROR: card 4111 refused", "P0001");
    assertThat(SqlErrors.serverMessage(raised)).doesNotContain("4111");
    assertThat(SqlErrors.translate(new DataAccessException("failed", raised), "writing"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("P0001");
  }
}
