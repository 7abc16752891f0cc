package dev.nolock.testkit.internal;

import dev.nolock.testkit.ServerUnreachableException;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import java.util.stream.Collectors;

/**
 * The check every extension runs before it builds a client: a plain TCP connect with a short
 * timeout. Drivers left to find out on their own either retry for minutes (jetcd, Kafka) or fail
 * with a message that does not say how to start the server; this fails at once and says.
 */
public final class Reachability {

  /** Long enough for a loaded 2-core machine, short enough that a wrong address fails fast. */
  public static final Duration CONNECT_TIMEOUT = Duration.ofSeconds(2);

  private Reachability() {}

  /**
   * Returns when at least one of {@code hosts} accepts a TCP connection.
   *
   * @throws ServerUnreachableException naming the variable and the start command otherwise
   */
  public static void requireReachable(Server server, List<HostPort> hosts) {
    IOException last = null;
    for (HostPort hostPort : hosts) {
      try {
        probe(hostPort);
        return;
      } catch (IOException e) {
        last = e;
      }
    }
    throw new ServerUnreachableException(message(server, hosts, last), last);
  }

  static String message(Server server, List<HostPort> hosts, IOException cause) {
    String where = hosts.stream().map(HostPort::toString).collect(Collectors.joining(","));
    String why = cause == null ? "" : " (" + describe(cause) + ")";
    return server.displayName()
        + " is not reachable at "
        + where
        + " ("
        + server.variable()
        + "). Start it with: "
        + server.startCommand()
        + " — or set "
        + server.variable()
        + " to a running server"
        + why;
  }

  private static void probe(HostPort hostPort) throws IOException {
    InetSocketAddress address = new InetSocketAddress(hostPort.host(), hostPort.port());
    if (address.isUnresolved()) {
      throw new IOException("unknown host " + hostPort.host());
    }
    try (Socket socket = new Socket()) {
      socket.connect(address, (int) CONNECT_TIMEOUT.toMillis());
    }
  }

  private static String describe(IOException e) {
    String text = e.getMessage();
    return text == null ? e.getClass().getSimpleName() : text;
  }
}
