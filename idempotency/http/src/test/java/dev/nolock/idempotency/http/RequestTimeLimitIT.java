package dev.nolock.idempotency.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.sun.net.httpserver.HttpServer;
import dev.nolock.idempotency.IdempotencyConfig;
import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.http.IdempotentHttpHandler.Reply;
import dev.nolock.testkit.ChildChannel;
import dev.nolock.testkit.ChildJvm;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import javax.sql.DataSource;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What the README says of {@code sun.net.httpserver.maxReqTime}: the JDK server reads it once, when
 * its classes load, so the server runs in a child JVM started with it. A client that stops sending
 * a body within the limit holds the handler thread in the body read (the control, {@link
 * HostileClientIT#controlABodyWithinTheLimitThatStallsHoldsTheHandlerThreadInTheRead}) until the
 * server closes its connection.
 */
@ExtendWith(PostgresExtension.class)
class RequestTimeLimitIT {

  /** Bounds a wait that hangs for ever when the limit does not work; it takes about 2 s. */
  private static final Duration HANG_GUARD = Duration.ofSeconds(30);

  private final PostgresSchema schema;

  RequestTimeLimitIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @BeforeAll
  static void table(PostgresSchema schema) {
    IdempotencyKeys.create(
            schema.dataSource(), IdempotencyConfig.ofDefaults(), IdempotentHttpHandler.replyCodec())
        .createTableIfMissing();
  }

  @Test
  void withMaxReqTimeAStalledBodyIsCutOffAndTheHandlerThreadFreed() throws Exception {
    ExecutorService reader = Executors.newCachedThreadPool();
    try (ChildJvm child =
        ChildJvm.start(
            "server",
            Map.of("sun.net.httpserver.maxReqTime", "1"),
            Child.class,
            schema.jdbcUrl())) {
      int port = Integer.parseInt(child.awaitLine("READY", HANG_GUARD)[1]);
      try (Socket stalled = new Socket("127.0.0.1", port)) {
        OutputStream out = stalled.getOutputStream();
        out.write(
            ("POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: "
                    + UUID.randomUUID()
                    + "\r\nContent-Length: 100\r\n\r\n0123456789")
                .getBytes(StandardCharsets.ISO_8859_1));
        out.flush();
        CompletableFuture<byte[]> untilClosed = readUntilClosed(stalled.getInputStream(), reader);

        String[] freed = child.awaitLine("FREED", HANG_GUARD);
        await("the close of the stalled connection").atMost(HANG_GUARD).until(untilClosed::isDone);

        assertThat(freed[1]).isEqualTo("AsynchronousCloseException");
        assertThat(untilClosed.join()).as("no answer, only the close").isEmpty();
        try (Socket other = new Socket("127.0.0.1", port)) {
          byte[] body = "chair".getBytes(StandardCharsets.ISO_8859_1);
          other
              .getOutputStream()
              .write(
                  ("POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\nIdempotency-Key: "
                          + UUID.randomUUID()
                          + "\r\nConnection: close\r\nContent-Length: "
                          + body.length
                          + "\r\n\r\nchair")
                      .getBytes(StandardCharsets.ISO_8859_1));
          CompletableFuture<byte[]> answer = readUntilClosed(other.getInputStream(), reader);
          await("the answer on the freed thread").atMost(HANG_GUARD).until(answer::isDone);
          assertThat(new String(answer.join(), StandardCharsets.ISO_8859_1))
              .startsWith("HTTP/1.1 201");
        }
      }
      child.stop();
      assertThat(child.awaitExit(HANG_GUARD)).isZero();
    } finally {
      reader.shutdownNow();
    }
  }

  private static CompletableFuture<byte[]> readUntilClosed(InputStream in, ExecutorService reader) {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            return in.readAllBytes();
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        },
        reader);
  }

  /**
   * The server: one handler thread, the handler on {@code /orders}; prints {@code READY <port>},
   * and {@code FREED <exception>} when the handler's thread leaves a request on an exception.
   */
  public static final class Child {
    public static void main(String[] args) {
      ChildChannel channel = ChildChannel.open();
      try {
        DataSource pool = ChildChannel.pool(args[0], 2, "child");
        IdempotentHttpHandler handler =
            IdempotentHttpHandler.builder(
                    IdempotencyKeys.create(
                        pool, IdempotencyConfig.ofDefaults(), IdempotentHttpHandler.replyCodec()),
                    "orders.create",
                    (request, attempt) -> Reply.json(201, "{}"))
                .anonymous()
                .maxBodyBytes(1024)
                .build();
        ExecutorService thread = Executors.newSingleThreadExecutor();
        HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
        server.createContext(
            "/orders",
            exchange -> {
              try {
                handler.handle(exchange);
              } catch (IOException e) {
                channel.report("FREED", e.getClass().getSimpleName());
                throw e;
              }
            });
        server.setExecutor(thread);
        server.start();
        channel.report("READY", server.getAddress().getPort());
        channel.awaitStop();
        server.stop(0);
        thread.shutdownNow();
        System.exit(0);
      } catch (Exception | Error e) {
        channel.fail(e, 1);
      }
    }
  }
}
