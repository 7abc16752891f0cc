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
 *       {@link #loseNext(FaultKind, Runnable)} runs an action between the discard and the drop:
 *       what others do while the client still waits for its answer.
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
    return loseNext(kind, () -> {});
  }

  /**
   * Like {@link #loseNext(FaultKind)}, and runs {@code meanwhile} while the victim's client waits:
   * {@link FaultKind#ANSWER_LOST}: the server has applied the request, its answer is discarded,
   * then {@code meanwhile} runs, then the connection is closed (and the client may resend); {@link
   * FaultKind#REQUEST_LOST}: the request is discarded, then {@code meanwhile} runs, then the
   * connection is closed, so the server never sees that send.
   *
   * <p>{@code meanwhile} runs on the proxy's own closing thread (the client's calling thread is
   * blocked on its answer), so it must not send anything through this proxy. It may take as long as
   * the client's command timeout allows. If it throws, the connection is closed all the same, and
   * {@link InjectedFault#assertFired()} of the returned fault fails with what it threw.
   */
  public InjectedFault loseNext(FaultKind kind, Runnable meanwhile) {
    Loss loss = new Loss(kind, Objects.requireNonNull(meanwhile, "meanwhile"));
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
    final Runnable meanwhile;
    final AtomicBoolean fired = new AtomicBoolean();
    final AtomicReference<Throwable> meanwhileFailed = new AtomicReference<>();
    volatile InetSocketAddress victim;

    Loss(FaultKind kind, Runnable meanwhile) {
      this.kind = Objects.requireNonNull(kind, "kind");
      this.meanwhile = meanwhile;
    }

    @Override
    public boolean fired() {
      return fired.get();
    }

    @Override
    public void assertFired() {
      InjectedFault.super.assertFired();
      Throwable failed = meanwhileFailed.get();
      if (failed != null) {
        throw new AssertionError(
            this + " fired, but its meanwhile action threw: " + failed, failed);
      }
    }

    /** Runs on the closing thread: the meanwhile action, then the drop of the connection. */
    void strike(InetSocketAddress client, AtomicReference<Loss> slot) {
      try {
        meanwhile.run();
      } catch (Throwable e) {
        meanwhileFailed.set(e);
      } finally {
        crusher.closeClient(client);
        slot.compareAndSet(this, null);
      }
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
        closer.execute(() -> loss.strike(client, slot));
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
