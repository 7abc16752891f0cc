package dev.nolock.testkit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.ServerSocket;
import org.netcrusher.core.reactor.NioReactor;
import org.netcrusher.tcp.TcpCrusher;
import org.netcrusher.tcp.TcpCrusherBuilder;

/**
 * A TCP proxy on 127.0.0.1 that a test puts between a client and a real server to inject network
 * faults: Toxiproxy's role, played by netcrusher (no Toxiproxy server is reachable here). Needs
 * {@code com.github.netcrusherorg:netcrusher-core} on the test classpath.
 *
 * <ul>
 *   <li>{@link #freeze()}: traffic stops both ways and new connections stall; bytes already sent
 *       wait in the proxy, so a request in flight arrives late after {@link #unfreeze()} — a
 *       partition that heals;
 *   <li>{@link #cut()}: every connection is closed and new ones are refused until {@link
 *       #restore()} — a partition that fails fast.
 * </ul>
 */
public final class TcpProxy implements AutoCloseable {

  private final NioReactor reactor;
  private final TcpCrusher crusher;
  private final int port;

  private TcpProxy(String targetHost, int targetPort) throws IOException {
    this.port = freePort();
    this.reactor = new NioReactor();
    this.crusher =
        TcpCrusherBuilder.builder()
            .withReactor(reactor)
            .withBindAddress("127.0.0.1", port)
            .withConnectAddress(targetHost, targetPort)
            .buildAndOpen();
  }

  /** A proxy on a free loopback port forwarding to {@code targetHost:targetPort}. */
  public static TcpProxy start(String targetHost, int targetPort) {
    try {
      return new TcpProxy(targetHost, targetPort);
    } catch (IOException e) {
      throw new UncheckedIOException(
          "could not start a TCP proxy to " + targetHost + ":" + targetPort, e);
    }
  }

  /** The loopback port clients connect to instead of the server's. */
  public int port() {
    return port;
  }

  /** Stops all traffic; nothing is lost, everything waits. */
  public void freeze() {
    crusher.freeze();
  }

  /** Lets the waiting traffic through. */
  public void unfreeze() {
    crusher.unfreeze();
  }

  /** Closes every connection and refuses new ones. */
  public void cut() {
    crusher.closeAllPairs();
    crusher.close();
  }

  /** Accepts connections again after {@link #cut()}. */
  public void restore() {
    crusher.open();
  }

  @Override
  public void close() {
    if (crusher.isOpen()) {
      crusher.close();
    }
    reactor.close();
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    }
  }
}
