package dev.nolock.idempotency.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.sun.net.httpserver.HttpServer;
import dev.nolock.idempotency.Caller;
import dev.nolock.idempotency.IdempotencyConfig;
import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.Outcome;
import dev.nolock.idempotency.ResultCodec;
import dev.nolock.idempotency.StoredResult;
import dev.nolock.idempotency.http.IdempotentHttpHandler.Reply;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * What one slow or hostile client can do to the handler, spoken over a raw {@link Socket} on
 * 127.0.0.1: a request body that never ends, and a reply whose content type the server's header
 * writer would narrow to CR and LF. The server has a single handler thread, so that a request on
 * another connection is served only if no earlier request still holds it.
 */
@ExtendWith(PostgresExtension.class)
class HostileClientIT {

  /** Bounds a wait that hangs for ever when the handler is stalled; a healthy one takes ms. */
  private static final Duration HANG_GUARD = Duration.ofSeconds(10);

  private static final int MAX_BODY_BYTES = 1024;
  private static final String SCOPE = "orders.create";
  private static final String SPLITTING_CONTENT_TYPE = "text/plain\u010D\u010Aset-cookie: x=1";

  private final PostgresSchema schema;
  private ExecutorService serverThread;
  private ExecutorService clientThreads;
  private HttpServer server;
  private int port;
  private final AtomicReference<Thread> handlerThread = new AtomicReference<>();

  HostileClientIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @BeforeAll
  static void table(PostgresSchema schema) {
    IdempotencyKeys.create(
            schema.dataSource(), IdempotencyConfig.ofDefaults(), IdempotentHttpHandler.replyCodec())
        .createTableIfMissing();
  }

  @BeforeEach
  void startServer() throws IOException {
    IdempotencyKeys<Reply> keys =
        IdempotencyKeys.create(
            schema.dataSource(),
            IdempotencyConfig.ofDefaults(),
            IdempotentHttpHandler.replyCodec());
    IdempotentHttpHandler handler =
        IdempotentHttpHandler.builder(
                keys,
                SCOPE,
                (request, attempt) -> {
                  if (request.bodyText().equals("split")) {
                    return new Reply(201, SPLITTING_CONTENT_TYPE, new byte[] {'o', 'k'});
                  }
                  return Reply.json(201, "{\"item\":\"" + request.bodyText() + "\"}");
                })
            .anonymous()
            .maxBodyBytes(MAX_BODY_BYTES)
            .build();
    serverThread =
        Executors.newSingleThreadExecutor(
            task -> {
              Thread thread = new Thread(task, "handler");
              handlerThread.set(thread);
              return thread;
            });
    clientThreads = Executors.newCachedThreadPool();
    server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 16);
    server.createContext("/orders", handler);
    // The controls: what a handler gets from the JDK server without the protections under test.
    server.createContext(
        "/control/close-after-refusal",
        exchange -> {
          try (exchange) {
            exchange.getResponseHeaders().set("Connection", "close");
            exchange.sendResponseHeaders(400, 7);
            exchange.getResponseBody().write(ascii("refused"));
            exchange.getResponseBody().flush();
          }
        });
    server.createContext(
        "/control/raw-content-type",
        exchange -> {
          try (exchange) {
            exchange.getResponseHeaders().set("Content-Type", SPLITTING_CONTENT_TYPE);
            exchange.sendResponseHeaders(200, -1);
          }
        });
    server.setExecutor(serverThread);
    server.start();
    port = server.getAddress().getPort();
  }

  @AfterEach
  void stopServer() {
    // Closes every connection, which also frees a handler thread stuck reading one.
    server.stop(0);
    serverThread.shutdownNow();
    clientThreads.shutdownNow();
  }

  @Test
  void aMissingKeyWithAChunkedBodyThatNeverEndsIsAnswered400AndTheConnectionClosed()
      throws Exception {
    RawAnswer answer =
        refusedWhileTheBodyStalls(
            head(null, "Transfer-Encoding: chunked"), ascii("5\r\nhello\r\n"));

    assertThat(answer.statusLine()).startsWith("HTTP/1.1 400");
    assertThat(answer.bodyText()).contains("\"status\":400");
  }

  @Test
  void aChunkedBodyOverTheLimitThatNeverEndsIsAnswered413AndTheConnectionClosed() throws Exception {
    // One chunk of 2048 bytes announced, 1025 sent: one more than the limit, then nothing.
    byte[] partial = concat(ascii("800\r\n"), ascii("x".repeat(MAX_BODY_BYTES + 1)));
    RawAnswer answer =
        refusedWhileTheBodyStalls(head(newKey(), "Transfer-Encoding: chunked"), partial);

    assertThat(answer.statusLine()).startsWith("HTTP/1.1 413");
    assertThat(answer.bodyText()).contains("\"status\":413");
  }

  @Test
  void aMissingKeyWithAHugeContentLengthThatTricklesIsAnswered400AndTheConnectionClosed()
      throws Exception {
    RawAnswer answer =
        refusedWhileTheBodyStalls(head(null, "Content-Length: 1000000000"), ascii("0123456789"));

    assertThat(answer.statusLine()).startsWith("HTTP/1.1 400");
  }

  @Test
  void aContentLengthOverTheLimitIsAnswered413BeforeTheBodyArrives() throws Exception {
    RawAnswer answer =
        refusedWhileTheBodyStalls(
            head(newKey(), "Content-Length: 1000000000"), ascii("0123456789"));

    assertThat(answer.statusLine()).startsWith("HTTP/1.1 413");
    assertThat(answer.bodyText()).contains("\"status\":413");
  }

  @Test
  void aMissingKeyWithoutABodyIsAnswered400AndTheConnectionKept() throws Exception {
    try (Socket socket = new Socket("127.0.0.1", port)) {
      OutputStream out = socket.getOutputStream();
      InputStream in = socket.getInputStream();
      out.write(ascii(head(null, "Content-Length: 0")));
      out.flush();
      CompletableFuture<RawAnswer> refused = readOneAnswer(in);
      await("the 400").atMost(HANG_GUARD).until(refused::isDone);

      byte[] body = ascii("lamp");
      out.write(concat(ascii(head(newKey(), "Content-Length: " + body.length)), body));
      out.flush();
      CompletableFuture<RawAnswer> served = readOneAnswer(in);
      await("the next answer on the same connection").atMost(HANG_GUARD).until(served::isDone);

      assertThat(refused.join().statusLine()).startsWith("HTTP/1.1 400");
      assertThat(refused.join().header("connection")).isEmpty();
      assertThat(served.join().statusLine()).startsWith("HTTP/1.1 201");
    }
  }

  @Test
  void aContentTypeThatWouldNarrowToCrLfIsRefusedAs500AndSplitsNothing() throws Exception {
    RawAnswer answer = complete(newKey(), "split");

    assertThat(answer.headerNames()).doesNotContain("set-cookie");
    assertThat(answer.statusLine()).startsWith("HTTP/1.1 500");
  }

  @Test
  void aStoredReplyWhoseContentTypeWouldNarrowToCrLfIsReplayedAsOctetStream() throws Exception {
    // A row as the codec wrote it before headers were kept, [u16 length][content type][body], with
    // a content type that the Reply of that time accepted.
    String key = newKey();
    byte[] type = SPLITTING_CONTENT_TYPE.getBytes(StandardCharsets.UTF_8);
    byte[] row =
        ByteBuffer.allocate(2 + type.length + 2)
            .putShort((short) type.length)
            .put(type)
            .put(ascii("ok"))
            .array();
    IdempotencyKeys<StoredResult> raw =
        IdempotencyKeys.create(
            schema.dataSource(), IdempotencyConfig.ofDefaults(), ResultCodec.identity());
    Outcome<StoredResult> stored =
        raw.execute(
            SCOPE,
            Caller.anonymous(),
            key,
            IdempotentHttpHandler.fingerprint(
                "POST", URI.create("/orders"), Map.of(), ascii("replayed")),
            attempt -> StoredResult.of(201, row));
    assertThat(stored).isInstanceOf(Outcome.Completed.class);

    RawAnswer answer = complete(key, "replayed");

    assertThat(answer.headerNames()).doesNotContain("set-cookie");
    assertThat(answer.statusLine()).startsWith("HTTP/1.1 201");
    assertThat(answer.header("content-type")).containsExactly("application/octet-stream");
    assertThat(answer.header(IdempotentHttpHandler.REPLAYED_HEADER)).containsExactly("true");
    assertThat(answer.bodyText()).isEqualTo("ok");
  }

  @Test
  void controlClosingTheExchangeAfterARefusalReadsTheRestOfTheBodyAndHoldsTheThread()
      throws Exception {
    // What the handler would do without BodyLeftUnreadException: answer with Connection: close and
    // close the exchange. The JDK server then reads what is left of the body, with no time limit.
    try (Socket stalled = new Socket("127.0.0.1", port)) {
      OutputStream out = stalled.getOutputStream();
      out.write(
          concat(
              ascii(
                  "POST /control/close-after-refusal HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      + "Transfer-Encoding: chunked\r\n\r\n"),
              ascii("5\r\nhello\r\n")));
      out.flush();

      await("the handler thread reading the rest of the body in the exchange's close")
          .atMost(HANG_GUARD)
          .until(
              () ->
                  handlerIsIn(
                      "sun.net.httpserver.ExchangeImpl.close",
                      "sun.net.httpserver.LeftOverInputStream.drain"));
    }
  }

  @Test
  void controlABodyWithinTheLimitThatStallsHoldsTheHandlerThreadInTheRead() throws Exception {
    // No refusal here: the handler waits for a body it may accept. Only the server can end the
    // wait (RequestTimeLimitIT: sun.net.httpserver.maxReqTime), or a proxy in front.
    try (Socket stalled = new Socket("127.0.0.1", port)) {
      OutputStream out = stalled.getOutputStream();
      out.write(concat(ascii(head(newKey(), "Content-Length: 100")), ascii("0123456789")));
      out.flush();

      await("the handler thread waiting in the body read")
          .atMost(HANG_GUARD)
          .until(
              () ->
                  handlerIsIn(
                      "dev.nolock.idempotency.http.IdempotentHttpHandler.readBody",
                      "sun.net.httpserver.FixedLengthInputStream.readImpl"));
    }
  }

  /** Whether the server's handler thread is, right now, in every one of {@code methods}. */
  private boolean handlerIsIn(String... methods) {
    Thread thread = handlerThread.get();
    if (thread == null) {
      return false;
    }
    List<String> frames =
        Arrays.stream(thread.getStackTrace())
            .map(frame -> frame.getClassName() + "." + frame.getMethodName())
            .toList();
    return frames.containsAll(List.of(methods));
  }

  @Test
  void controlTheServerWritesACharAboveFfAsItsLowByteAndSplitsTheHeader() throws Exception {
    try (Socket socket = new Socket("127.0.0.1", port)) {
      socket
          .getOutputStream()
          .write(
              ascii(
                  "GET /control/raw-content-type HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                      + "Connection: close\r\n\r\n"));
      CompletableFuture<byte[]> untilClosed = readUntilClosed(socket);
      await("the control's answer").atMost(HANG_GUARD).until(untilClosed::isDone);

      RawAnswer answer = RawAnswer.parse(untilClosed.join());

      assertThat(answer.header("set-cookie")).containsExactly("x=1");
    }
  }

  /**
   * Sends {@code head} and {@code partialBody} in one write and never the rest, keeping the
   * connection open; the server must send its whole answer and close the connection, and, while
   * this connection stays open, serve another on its only handler thread.
   */
  private RawAnswer refusedWhileTheBodyStalls(String head, byte[] partialBody) throws Exception {
    try (Socket stalled = new Socket("127.0.0.1", port)) {
      OutputStream out = stalled.getOutputStream();
      out.write(concat(ascii(head), partialBody));
      out.flush();
      CompletableFuture<byte[]> untilClosed = readUntilClosed(stalled);

      await("the answer and the close of the connection whose body never ends")
          .atMost(HANG_GUARD)
          .until(untilClosed::isDone);
      RawAnswer answer = RawAnswer.parse(untilClosed.join());

      assertThat(stalled.isClosed() || stalled.isOutputShutdown()).isFalse();
      RawAnswer other = complete(newKey(), "chair");
      assertThat(other.statusLine()).startsWith("HTTP/1.1 201");
      assertThat(answer.header("connection")).containsExactly("close");
      assertThat(answer.body()).hasSize(Integer.parseInt(answer.header("content-length").get(0)));
      return answer;
    }
  }

  /** A whole POST with {@code Connection: close}, and everything the server sends back. */
  private RawAnswer complete(String key, String body) throws Exception {
    try (Socket socket = new Socket("127.0.0.1", port)) {
      byte[] bytes = ascii(body);
      OutputStream out = socket.getOutputStream();
      out.write(
          concat(
              ascii(head(key, "Content-Length: " + bytes.length + "\r\nConnection: close")),
              bytes));
      out.flush();
      CompletableFuture<byte[]> untilClosed = readUntilClosed(socket);
      await("the answer to a whole request").atMost(HANG_GUARD).until(untilClosed::isDone);
      return RawAnswer.parse(untilClosed.join());
    }
  }

  /** Every byte read until the server closes the connection (a read returns -1). */
  private CompletableFuture<byte[]> readUntilClosed(Socket socket) {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            return socket.getInputStream().readAllBytes();
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        },
        clientThreads);
  }

  /** One answer, its head and then as many body bytes as its {@code Content-Length} says. */
  private CompletableFuture<RawAnswer> readOneAnswer(InputStream in) {
    return CompletableFuture.supplyAsync(
        () -> {
          try {
            StringBuilder head = new StringBuilder();
            while (head.indexOf("\r\n\r\n") < 0) {
              int b = in.read();
              if (b == -1) {
                throw new IOException("closed after " + head);
              }
              head.append((char) b);
            }
            RawAnswer parsed = RawAnswer.parse(ascii(head.toString()));
            int length = Integer.parseInt(parsed.header("content-length").get(0));
            return new RawAnswer(parsed.statusLine(), parsed.headerLines(), in.readNBytes(length));
          } catch (IOException e) {
            throw new UncheckedIOException(e);
          }
        },
        clientThreads);
  }

  private static String head(String key, String framing) {
    return "POST /orders HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + (key == null ? "" : IdempotentHttpHandler.KEY_HEADER + ": " + key + "\r\n")
        + framing
        + "\r\n\r\n";
  }

  private static String newKey() {
    return UUID.randomUUID().toString();
  }

  private static byte[] ascii(String text) {
    return text.getBytes(StandardCharsets.ISO_8859_1);
  }

  private static byte[] concat(byte[] a, byte[] b) {
    byte[] both = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, both, a.length, b.length);
    return both;
  }

  /** An HTTP/1.1 response as the bytes came, one header line per entry. */
  private record RawAnswer(String statusLine, List<String> headerLines, byte[] body) {

    static RawAnswer parse(byte[] bytes) {
      String all = new String(bytes, StandardCharsets.ISO_8859_1);
      int end = all.indexOf("\r\n\r\n");
      assertThat(end).as("end of the head in %s", all).isNotNegative();
      List<String> lines = new ArrayList<>(List.of(all.substring(0, end).split("\r\n", -1)));
      String status = lines.remove(0);
      return new RawAnswer(status, lines, Arrays.copyOfRange(bytes, end + 4, bytes.length));
    }

    List<String> headerNames() {
      return headerLines.stream()
          .map(line -> line.substring(0, Math.max(0, line.indexOf(':'))).toLowerCase(Locale.ROOT))
          .toList();
    }

    List<String> header(String name) {
      return headerLines.stream()
          .filter(line -> line.toLowerCase(Locale.ROOT).startsWith(name.toLowerCase(Locale.ROOT)))
          .filter(line -> line.length() > name.length() && line.charAt(name.length()) == ':')
          .map(line -> line.substring(name.length() + 1).strip())
          .toList();
    }

    String bodyText() {
      return new String(body, StandardCharsets.UTF_8);
    }
  }
}
