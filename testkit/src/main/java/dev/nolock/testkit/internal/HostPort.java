package dev.nolock.testkit.internal;

import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A host and a TCP port parsed out of an endpoint setting, so the reachability check can probe it
 * without loading any driver. Parsing is strict: a setting that would make a driver guess is
 * rejected with a message that shows the expected shape.
 */
public record HostPort(String host, int port) {

  public HostPort {
    if (host == null || host.isBlank()) {
      throw new IllegalArgumentException("host must not be blank");
    }
    if (port < 1 || port > 65_535) {
      throw new IllegalArgumentException("port must be 1..65535 but was " + port);
    }
  }

  @Override
  public String toString() {
    return host.indexOf(':') >= 0 ? "[" + host + "]:" + port : host + ":" + port;
  }

  /**
   * Hosts of a pgjdbc URL {@code jdbc:postgresql://host[:port][,host[:port]]/database[?k=v&...]}.
   *
   * @throws IllegalArgumentException when the URL is not of that shape
   */
  public static List<HostPort> ofJdbcPostgres(String url, Server server) {
    String prefix = "jdbc:postgresql://";
    if (url == null || !url.startsWith(prefix)) {
      throw invalid(server, url, "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
    }
    String rest = url.substring(prefix.length());
    int slash = rest.indexOf('/');
    if (slash <= 0 || slash == rest.length() - 1 || rest.charAt(slash + 1) == '?') {
      // pgjdbc would silently fall back to a database named after the user.
      throw invalid(server, url, "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
    }
    List<HostPort> hosts = new ArrayList<>();
    for (String part : rest.substring(0, slash).split(",", -1)) {
      hosts.add(parseHostPort(part, 5432, server, url));
    }
    return List.copyOf(hosts);
  }

  /**
   * Host of a Redis URI {@code redis://host[:port][/db]} or {@code rediss://...}.
   *
   * @throws IllegalArgumentException when the URI is not of that shape
   */
  public static List<HostPort> ofRedisUri(String uri, Server server) {
    URI parsed = parseUri(uri, server, "redis://127.0.0.1:6379");
    String scheme = parsed.getScheme() == null ? "" : parsed.getScheme().toLowerCase(Locale.ROOT);
    if (!scheme.equals("redis") && !scheme.equals("rediss")) {
      throw invalid(server, uri, "redis://127.0.0.1:6379");
    }
    return List.of(hostPortOf(parsed, 6379, server, uri, "redis://127.0.0.1:6379"));
  }

  /**
   * Hosts of an HTTP endpoint list {@code http://host:port[,http://host:port]}.
   *
   * @throws IllegalArgumentException when an entry is not an http(s) URL with a host
   */
  public static List<HostPort> ofHttpEndpoints(String endpoints, Server server, String example) {
    if (endpoints == null || endpoints.isBlank()) {
      throw invalid(server, endpoints, example);
    }
    List<HostPort> hosts = new ArrayList<>();
    for (String entry : endpoints.split(",", -1)) {
      URI parsed = parseUri(entry.trim(), server, example);
      String scheme = parsed.getScheme() == null ? "" : parsed.getScheme().toLowerCase(Locale.ROOT);
      int defaultPort =
          switch (scheme) {
            case "http" -> 80;
            case "https" -> 443;
            default -> throw invalid(server, endpoints, example);
          };
      hosts.add(hostPortOf(parsed, defaultPort, server, endpoints, example));
    }
    return List.copyOf(hosts);
  }

  /**
   * Hosts of a Kafka bootstrap list {@code host:port[,host:port]}; the port is required because
   * Kafka clients require it.
   *
   * @throws IllegalArgumentException when an entry is not {@code host:port}
   */
  public static List<HostPort> ofBootstrapServers(String bootstrap, Server server) {
    if (bootstrap == null || bootstrap.isBlank()) {
      throw invalid(server, bootstrap, "127.0.0.1:9092");
    }
    List<HostPort> hosts = new ArrayList<>();
    for (String entry : bootstrap.split(",", -1)) {
      HostPort hostPort = parseHostPort(entry.trim(), -1, server, bootstrap);
      hosts.add(hostPort);
    }
    return List.copyOf(hosts);
  }

  private static HostPort parseHostPort(String text, int defaultPort, Server server, String whole) {
    String example = server == Server.KAFKA ? "127.0.0.1:9092" : "127.0.0.1:" + defaultPort;
    String host;
    String port;
    if (text.startsWith("[")) {
      int close = text.indexOf(']');
      if (close < 0) {
        throw invalid(server, whole, example);
      }
      host = text.substring(1, close);
      String after = text.substring(close + 1);
      if (!after.isEmpty() && !after.startsWith(":")) {
        throw invalid(server, whole, example);
      }
      port = after.isEmpty() ? null : after.substring(1);
    } else {
      int colon = text.lastIndexOf(':');
      host = colon < 0 ? text : text.substring(0, colon);
      port = colon < 0 ? null : text.substring(colon + 1);
    }
    if (host.isBlank() || host.contains("/") || host.contains("@")) {
      throw invalid(server, whole, example);
    }
    if (port == null) {
      if (defaultPort < 0) {
        throw invalid(server, whole, example);
      }
      return new HostPort(host, defaultPort);
    }
    try {
      return new HostPort(host, Integer.parseInt(port));
    } catch (IllegalArgumentException e) {
      throw invalid(server, whole, example);
    }
  }

  private static URI parseUri(String text, Server server, String example) {
    if (text == null || text.isBlank()) {
      throw invalid(server, text, example);
    }
    try {
      return new URI(text);
    } catch (URISyntaxException e) {
      throw invalid(server, text, example);
    }
  }

  private static HostPort hostPortOf(
      URI uri, int defaultPort, Server server, String whole, String example) {
    String host = uri.getHost();
    if (host == null || host.isBlank()) {
      throw invalid(server, whole, example);
    }
    if (host.startsWith("[") && host.endsWith("]")) {
      host = host.substring(1, host.length() - 1);
    }
    return new HostPort(host, uri.getPort() < 0 ? defaultPort : uri.getPort());
  }

  private static IllegalArgumentException invalid(Server server, String value, String example) {
    return new IllegalArgumentException(
        server.displayName()
            + " endpoint '"
            + value
            + "' ("
            + server.variable()
            + ") is not valid; set "
            + server.variable()
            + " to something like "
            + example);
  }
}
