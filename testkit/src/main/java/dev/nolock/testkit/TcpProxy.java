package dev.nolock.testkit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.util.Objects;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
import org.netcrusher.core.filter.TransformFilter;
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
 *       #restore()} — a partition that fails fast;
 *   <li>{@link #loseNext(FaultKind)}: the next request's answer (or the request itself) is
 *       discarded and its connection dropped; the client reconnects through the proxy, and its
 *       driver decides whether to send the request again (Lettuce does, for commands in flight).
 * </ul>
 */
public final class TcpProxy implements AutoCloseable {

  private final NioReactor reactor;
  private final TcpCrusher crusher;
  private final int port;
  private final AtomicReference<Loss> toServer = new AtomicReference<>();
  private final AtomicReference<Loss> toClient = new AtomicReference<>();
  // Connections are closed off the proxy's own thread, which is the one that runs the filters.
  private final ExecutorService closer =
      Executors.newSingleThreadExecutor(
          runnable -> {
            Thread thread = new Thread(runnable, "nolock-tcp-proxy-closer");
            thread.setDaemon(true);
            return thread;
          });

  private TcpProxy(String targetHost, int targetPort) throws IOException {
    this.port = freePort();
    this.reactor = new NioReactor();
    this.crusher =
        TcpCrusherBuilder.builder()
            .withReactor(reactor)
            .withBindAddress("127.0.0.1", port)
            .withConnectAddress(targetHost, targetPort)
            .withOutgoingTransformFilterFactory(client -> new Discard(toServer, client))
            .withIncomingTransformFilterFactory(client -> new Discard(toClient, client))
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

  /**
   * Arms a fault on the next bytes that cross the proxy in one direction, on whichever connection
   * sends them first: {@link FaultKind#ANSWER_LOST} discards the server's next answer (the server
   * has applied the request), {@link FaultKind#REQUEST_LOST} discards the client's next request
   * (the server never sees it). Then that connection is closed, as a network failure would close
   * it; the proxy keeps accepting new connections.
   *
   * <p>Target one request by sending nothing else through the proxy while the fault is armed: a
   * dedicated client connection, scripts loaded beforehand.
   */
  public InjectedFault loseNext(FaultKind kind) {
    Loss loss = new Loss(kind);
    (kind == FaultKind.ANSWER_LOST ? toClient : toServer).set(loss);
    return loss;
  }

  @Override
  public void close() {
    if (crusher.isOpen()) {
      crusher.close();
    }
    reactor.close();
    closer.shutdownNow();
  }

  @Override
  public String toString() {
    return "TcpProxy[127.0.0.1:" + port + " -> " + crusher.getConnectAddress() + "]";
  }

  private final class Loss implements InjectedFault {
    final FaultKind kind;
    final AtomicBoolean fired = new AtomicBoolean();
    volatile InetSocketAddress victim;

    Loss(FaultKind kind) {
      this.kind = Objects.requireNonNull(kind, "kind");
    }

    @Override
    public boolean fired() {
      return fired.get();
    }

    @Override
    public String toString() {
      return "TcpProxy "
          + kind
          + " on the next "
          + (kind == FaultKind.ANSWER_LOST ? "answer" : "request");
    }
  }

  /** A filter per connection and direction: discards bytes while this connection is the victim. */
  private final class Discard implements TransformFilter {
    private final AtomicReference<Loss> slot;
    private final InetSocketAddress client;

    Discard(AtomicReference<Loss> slot, InetSocketAddress client) {
      this.slot = slot;
      this.client = client;
    }

    @Override
    public void transform(ByteBuffer bytes) {
      Loss loss = slot.get();
      if (loss == null || !bytes.hasRemaining()) {
        return;
      }
      if (loss.fired.compareAndSet(false, true)) {
        loss.victim = client;
        closer.execute(
            () -> {
              crusher.closeClient(client);
              slot.compareAndSet(loss, null);
            });
      } else if (!client.equals(loss.victim)) {
        return;
      }
      // An empty buffer is dropped by netcrusher instead of being forwarded.
      bytes.position(bytes.limit());
    }
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0)) {
      return socket.getLocalPort();
    }
  }
}
