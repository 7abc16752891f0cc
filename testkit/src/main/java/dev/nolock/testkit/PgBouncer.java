package dev.nolock.testkit;

import static java.nio.charset.StandardCharsets.UTF_8;

import dev.nolock.testkit.internal.HostPort;
import dev.nolock.testkit.internal.JdbcUrls;
import dev.nolock.testkit.internal.Server;
import dev.nolock.testkit.internal.SimpleQueryClient;
import java.io.IOException;
import java.net.URLDecoder;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The real PgBouncer as a test sees it, made by {@link PgBouncerExtension}.
 *
 * <p>Guarantees: {@link #jdbcUrl()} goes through PgBouncer with {@code prepareThreshold=0}
 * (server-side prepared statements do not survive transaction pooling); {@link #adminConfig()}
 * reads the live settings from PgBouncer's admin console on every call, so a test can check the
 * pooling mode it relies on instead of assuming it.
 */
public final class PgBouncer {

  private static final Duration ADMIN_TIMEOUT = Duration.ofSeconds(10);

  private final String jdbcUrl;

  PgBouncer(String jdbcUrl) {
    this.jdbcUrl = JdbcUrls.withParameter(jdbcUrl, "prepareThreshold", "0");
  }

  /** A pgjdbc URL through PgBouncer, with {@code prepareThreshold=0}. */
  public String jdbcUrl() {
    return jdbcUrl;
  }

  /**
   * The admin console's {@code SHOW CONFIG} (the pseudo-database {@code pgbouncer} on the same host
   * and port, as the user and password of {@link #jdbcUrl()}) as setting name to value, in
   * PgBouncer's order.
   *
   * <p>The console speaks only the simple query protocol, and pgjdbc 42.7.5+ sends a {@code SET} on
   * connect that PgBouncer 1.18's console refuses; so this talks the protocol directly (trust,
   * password or md5 authentication).
   *
   * @throws IllegalStateException if the console cannot be reached or refuses the user, who must be
   *     in {@code admin_users} or {@code stats_users}
   */
  public Map<String, String> adminConfig() {
    String user = decoded("user", System.getProperty("user.name"));
    String password = decoded("password", null);
    IOException failure = null;
    for (HostPort host : HostPort.ofJdbcPostgres(jdbcUrl, Server.PGBOUNCER)) {
      try {
        List<Map<String, String>> rows =
            SimpleQueryClient.query(
                host, user, password, "pgbouncer", "SHOW CONFIG", ADMIN_TIMEOUT);
        Map<String, String> config = new LinkedHashMap<>();
        rows.forEach(row -> config.put(row.get("key"), row.get("value")));
        return config;
      } catch (IOException e) {
        failure = e;
      }
    }
    throw new IllegalStateException(
        "PgBouncer's admin console refused SHOW CONFIG as user '"
            + user
            + "': "
            + (failure == null ? "no host" : failure.getMessage())
            + ". The user in "
            + Server.PGBOUNCER.variable()
            + " must be listed in admin_users or stats_users of pgbouncer.ini.",
        failure);
  }

  /**
   * {@code adminConfig().get("pool_mode")}: {@code session}, {@code transaction} or {@code
   * statement}.
   */
  public String poolMode() {
    String mode = adminConfig().get("pool_mode");
    if (mode == null) {
      throw new IllegalStateException(
          "PgBouncer's SHOW CONFIG has no pool_mode row; does "
              + Server.PGBOUNCER.variable()
              + " point at PgBouncer rather than PostgreSQL?");
    }
    return mode;
  }

  private String decoded(String parameter, String fallback) {
    return JdbcUrls.parameter(jdbcUrl, parameter)
        .map(value -> URLDecoder.decode(value, UTF_8))
        .orElse(fallback);
  }

  @Override
  public String toString() {
    return "PgBouncer" + HostPort.ofJdbcPostgres(jdbcUrl, Server.PGBOUNCER);
  }
}
