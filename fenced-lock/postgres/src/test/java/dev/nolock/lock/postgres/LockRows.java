package dev.nolock.lock.postgres;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.ObservedLease;
import io.vavr.control.Option;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.time.Duration;
import java.util.Optional;
import javax.sql.DataSource;

/**
 * Reads and pokes the lease table with plain SQL, beside the backend under test. The table name is
 * a test constant, never input.
 */
final class LockRows {

  private final DataSource dataSource;
  private final String table;

  LockRows(DataSource dataSource, String table) {
    this.dataSource = dataSource;
    this.table = table;
  }

  /**
   * The stored row of {@code name}, expiry judged by the database's clock: {@code waitLeft} is the
   * time until {@code expires_at}, zero once it has passed (a released row ends at its release).
   * The table keeps no change marker and no duration, only the end.
   */
  Option<ObservedLease> peek(String name) {
    return Option.ofOptional(
        query(
            "SELECT owner, token, CASE WHEN expires_at <= n THEN 0 ELSE greatest(1,"
                + " (extract(epoch FROM expires_at - n) * 1000000)::bigint) END FROM "
                + table
                + ", (SELECT clock_timestamp() AS n) AS now WHERE name = ?",
            name,
            rs ->
                new ObservedLease(
                    Option.some(new LeaseHolder(rs.getString(1), FencingToken.of(rs.getLong(2)))),
                    Option.none(),
                    Option.none(),
                    Duration.ofNanos(rs.getLong(3) * 1000))));
  }

  /**
   * The holder of the stored lease of {@code name} while it is unexpired on the database's clock.
   */
  Optional<LeaseHolder> liveHolder(String name) {
    return peek(name).flatMap(ObservedLease::liveHolder).toJavaOptional();
  }

  /** The holder that the stored lease of {@code name} still names once it has expired or ended. */
  Optional<LeaseHolder> expiredHolder(String name) {
    return peek(name)
        .filter(ObservedLease::isExpired)
        .flatMap(ObservedLease::holder)
        .toJavaOptional();
  }

  /** How long the stored lease of {@code name} still runs, on the database's clock. */
  Duration remaining(String name) {
    return query(
            "SELECT (extract(epoch FROM expires_at - clock_timestamp()) * 1000000)::bigint FROM "
                + table
                + " WHERE name = ?",
            name,
            rs -> Duration.ofNanos(rs.getLong(1) * 1000))
        .orElseThrow();
  }

  /** The number of rows stored for {@code name}. */
  int count(String name) {
    return query("SELECT count(*) FROM " + table + " WHERE name = ?", name, rs -> rs.getInt(1))
        .orElseThrow();
  }

  /** Ends the stored lease now, as a pause past the TTL would from the database's view. */
  /** Deletes the lease row, as an operator's clean-up would: the token counter starts again. */
  void delete(String name) {
    try (Connection c = dataSource.getConnection();
        PreparedStatement s = c.prepareStatement("DELETE FROM " + table + " WHERE name = ?")) {
      s.setString(1, name);
      if (s.executeUpdate() != 1) {
        throw new IllegalStateException("no lease row for " + name);
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  void expireNow(String name) {
    try (Connection c = dataSource.getConnection();
        PreparedStatement s =
            c.prepareStatement(
                "UPDATE " + table + " SET expires_at = clock_timestamp() WHERE name = ?")) {
      s.setString(1, name);
      if (s.executeUpdate() != 1) {
        throw new IllegalStateException("no lease row for " + name);
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }

  private interface Row<T> {
    T read(ResultSet rs) throws SQLException;
  }

  private <T> Optional<T> query(String sql, String name, Row<T> row) {
    try (Connection c = dataSource.getConnection();
        PreparedStatement s = c.prepareStatement(sql)) {
      s.setString(1, name);
      try (ResultSet rs = s.executeQuery()) {
        return rs.next() ? Optional.of(row.read(rs)) : Optional.empty();
      }
    } catch (SQLException e) {
      throw new IllegalStateException(e);
    }
  }
}
