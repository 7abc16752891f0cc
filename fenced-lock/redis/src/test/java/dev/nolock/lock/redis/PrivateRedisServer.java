package dev.nolock.lock.redis;

import static org.awaitility.Awaitility.await;

import io.lettuce.core.RedisURI;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * A {@code redis-server} child process of this test JVM, on a free loopback port, without
 * persistence ({@code --save "" --appendonly no}), that a test may kill and start again on the same
 * port. Tests that restart Redis or flush its script cache use it, so the shared server is never
 * disturbed.
 */
final class PrivateRedisServer implements AutoCloseable {

  private static final Duration READY_TIMEOUT = Duration.ofSeconds(15);

  private final int port;
  private final Path dir;
  private final List<String> extraArgs;
  private volatile Process process;

  private PrivateRedisServer(int port, Path dir, List<String> extraArgs) {
    this.port = port;
    this.dir = dir;
    this.extraArgs = List.copyOf(extraArgs);
    // A JVM that dies before @AfterAll must not leave the child running.
    Runtime.getRuntime()
        .addShutdownHook(
            new Thread(
                () -> {
                  Process running = process;
                  if (running != null) {
                    running.destroyForcibly();
                  }
                },
                "private-redis-server-" + port + "-killer"));
  }

  /**
   * Starts a server on a free port and waits until it answers {@code PING}; {@code extraArgs} are
   * appended to the command line (e.g. {@code "--replicaof", "127.0.0.1", "6380"}).
   */
  static PrivateRedisServer start(String... extraArgs) throws IOException {
    Path dir = Files.createTempDirectory("nolock-redis-");
    int port;
    try (ServerSocket socket = new ServerSocket(0)) {
      port = socket.getLocalPort();
    }
    PrivateRedisServer server = new PrivateRedisServer(port, dir, List.of(extraArgs));
    try {
      server.startProcess();
    } catch (RuntimeException e) {
      try {
        server.close();
      } catch (IOException | RuntimeException suppressed) {
        e.addSuppressed(suppressed);
      }
      throw e;
    }
    return server;
  }

  int port() {
    return port;
  }

  /** The server's URI, with a command timeout of 5 s. */
  RedisURI uri() {
    return RedisURI.Builder.redis("127.0.0.1", port).withTimeout(Duration.ofSeconds(5)).build();
  }

  boolean isRunning() {
    Process running = process;
    return running != null && running.isAlive();
  }

  /** SIGKILL (a crash: nothing is saved), then waits until the process has exited. */
  void kill() {
    Process running = process;
    if (running == null) {
      return;
    }
    running.destroyForcibly();
    try {
      if (!running.waitFor(30, TimeUnit.SECONDS)) {
        throw new IllegalStateException("redis-server on port " + port + " did not exit");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("Interrupted while waiting for redis-server to exit", e);
    }
    process = null;
  }

  /** Kills the server and starts a new one on the same port, with an empty data set. */
  void restart() {
    kill();
    startProcess();
  }

  /** Starts the server again after {@link #kill()}; waits until it answers {@code PING}. */
  void startProcess() {
    if (isRunning()) {
      throw new IllegalStateException("redis-server on port " + port + " is already running");
    }
    List<String> command =
        new java.util.ArrayList<>(
            List.of(
                "redis-server",
                "--port",
                Integer.toString(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                dir.toString()));
    command.addAll(extraArgs);
    ProcessBuilder builder = new ProcessBuilder(command);
    builder.redirectErrorStream(true);
    builder.redirectOutput(ProcessBuilder.Redirect.appendTo(dir.resolve("redis.log").toFile()));
    try {
      process = builder.start();
    } catch (IOException e) {
      throw new UncheckedIOException("Could not start redis-server; is it on the PATH?", e);
    }
    Process started = process;
    try {
      awaitPing(started);
    } catch (RuntimeException e) {
      kill();
      throw e;
    }
  }

  private void awaitPing(Process started) {
    await("redis-server on port " + port + " answers PING")
        .atMost(READY_TIMEOUT)
        .pollInterval(Duration.ofMillis(20))
        .ignoreExceptionsInstanceOf(IOException.class)
        .until(
            () -> {
              if (!started.isAlive()) {
                throw new IllegalStateException(
                    "redis-server exited with " + started.exitValue() + ":\n" + log());
              }
              return answersPing();
            });
  }

  private boolean answersPing() throws IOException {
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress("127.0.0.1", port), 500);
      socket.setSoTimeout(1000);
      OutputStream out = socket.getOutputStream();
      out.write("PING\r\n".getBytes(StandardCharsets.US_ASCII));
      out.flush();
      BufferedReader in =
          new BufferedReader(
              new InputStreamReader(socket.getInputStream(), StandardCharsets.US_ASCII));
      return "+PONG".equals(in.readLine());
    }
  }

  private String log() {
    try {
      return Files.readString(dir.resolve("redis.log"));
    } catch (IOException e) {
      return "(no log: " + e + ")";
    }
  }

  @Override
  public void close() throws IOException {
    kill();
    try (Stream<Path> files = Files.walk(dir)) {
      for (Path path : files.sorted(Comparator.reverseOrder()).toList()) {
        Files.deleteIfExists(path);
      }
    }
  }
}
