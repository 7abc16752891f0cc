package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(PgBouncerExtension.class)
class PgBouncerExtensionIT {

  @Test
  void adminConsoleReportsTransactionPooling(PgBouncer pgBouncer) {
    assertThat(pgBouncer.adminConfig()).containsEntry("pool_mode", "transaction");
    assertThat(pgBouncer.poolMode()).isEqualTo("transaction");
  }

  @Test
  void repeatedPreparedSelectWorksThroughTransactionPooling(PgBouncer pgBouncer)
      throws SQLException {
    assertThat(pgBouncer.jdbcUrl()).contains("prepareThreshold=0");
    try (Connection connection = DriverManager.getConnection(pgBouncer.jdbcUrl());
        PreparedStatement select = connection.prepareStatement("select ?::int")) {
      // Past pgjdbc's default prepareThreshold of 5, which would break under PgBouncer.
      for (int i = 1; i <= 10; i++) {
        select.setInt(1, i);
        try (ResultSet rows = select.executeQuery()) {
          assertThat(rows.next()).isTrue();
          assertThat(rows.getInt(1)).isEqualTo(i);
        }
      }
    }
  }
}
