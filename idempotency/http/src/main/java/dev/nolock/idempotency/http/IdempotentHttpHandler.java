package dev.nolock.idempotency.http;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpHandler;
import dev.nolock.idempotency.Attempt;
import dev.nolock.idempotency.Caller;
import dev.nolock.idempotency.Fingerprint;
import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.InvalidIdempotencyKeyException;
import dev.nolock.idempotency.Outcome;
import dev.nolock.idempotency.ResultCodec;
import dev.nolock.idempotency.StoredResult;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.ErrorDescriber;
import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Function;
import java.util.stream.Stream;

/**
 * The HTTP binding of {@link IdempotencyKeys} for the JDK's {@code com.sun.net.httpserver}: reads
 * the {@code Idempotency-Key} header, fingerprints the request, runs the endpoint once per key and
 * answers with the IETF draft's status codes.
 *
 * <table>
 *   <caption>Answers</caption>
 *   <tr><th>outcome</th><th>status</th><th>headers</th></tr>
 *   <tr><td>first run</td><td>the endpoint's</td><td>the {@link Reply}'s: {@code Content-Type}
 *       and its {@link Reply#headers()} (e.g. {@code Location})</td></tr>
 *   <tr><td>repeat with the same request, completed</td><td>the stored one</td>
 *       <td>the stored ones, the same as the first run's, and {@code Idempotent-Replayed: true}
 *       </td></tr>
 *   <tr><td>key missing or malformed</td><td>400</td><td>{@code Connection: close} when a
 *       body may follow: see {@link #handle}</td></tr>
 *   <tr><td>{@link Builder#principal} found no principal (null, empty or blank)</td><td>401</td>
 *       <td>as for 400</td></tr>
 *   <tr><td>repeat while the first is in progress, or a stale attempt</td><td>409</td>
 *       <td>{@code Retry-After}</td></tr>
 *   <tr><td>key reused with a different request</td><td>422</td><td></td></tr>
 *   <tr><td>request body over the limit, or a {@code Content-Length} over it</td><td>413</td>
 *       <td>{@code Connection: close}: see {@link #handle}</td></tr>
 *   <tr><td>the endpoint threw and the key was released</td><td>500</td><td></td></tr>
 *   <tr><td>PostgreSQL failed</td><td>503</td><td>{@code Retry-After}</td></tr>
 * </table>
 *
 * Error bodies are {@code application/problem+json} (RFC 9457), as in the draft's examples.
 *
 * <p>Keys belong to their caller ({@link Caller}): with {@link Builder#principal}, each principal
 * has a key space of its own, so the same key from another principal is another request, run for
 * it, and nobody learns whether someone else used a key (no 409 or 422 across principals), fetches
 * another's stored response, or claims another's key first. With {@link Builder#anonymous()}, every
 * client shares one key space: anyone who knows or guesses a key can learn that it exists (409,
 * 422), receive its stored response by repeating its request, or claim a predictable key first. The
 * fingerprint is the SHA-256 of the method, the raw path, the raw query (an absent query and an
 * empty one differ), the request's {@code Content-Type} (absent and empty differ) and the body. The
 * key header is accepted bare (Stripe's form, {@code Idempotency-Key: 8e03...}) or as the draft's
 * Structured Field string ({@code "8e03..."}).
 *
 * <p>Wrap only the endpoints that change state (POST, PATCH): the handler applies to every request
 * it receives. Thread-safe; one instance per endpoint.
 *
 * <p>One client cannot hold a thread of the server after a 400 or 413 (the rest of its body is
 * never read) nor split the answer's headers (a {@link Reply}'s content type and header values are
 * visible ASCII). It can hold one for as long as it takes to send a request within the limit, or to
 * read the answer: give the server an executor, and bound those times with the JDK server's {@code
 * sun.net.httpserver.maxReqTime} and {@code maxRspTime} or a proxy in front (see the README).
 */
public final class IdempotentHttpHandler implements HttpHandler {

  public static final String KEY_HEADER = "Idempotency-Key";
  public static final String REPLAYED_HEADER = "Idempotent-Replayed";
  public static final int DEFAULT_MAX_BODY_BYTES = 1024 * 1024;

  private static final String PROBLEM_JSON = "application/problem+json";
  private static final System.Logger LOG = System.getLogger(IdempotentHttpHandler.class.getName());

  /**
   * A request, read in full before the endpoint runs.
   *
   * @param headers the request headers, names as the JDK normalises them ({@code Content-type})
   */
  public record Request(String method, URI uri, Map<String, List<String>> headers, byte[] body) {
    public Request {
      Objects.requireNonNull(method, "method");
      Objects.requireNonNull(uri, "uri");
      Map<String, List<String>> copy = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
      headers.forEach((name, values) -> copy.put(name, List.copyOf(values)));
      headers = Collections.unmodifiableMap(copy);
      body = body.clone();
    }

    @Override
    public byte[] body() {
      return body.clone();
    }

    /** The body as UTF-8 text. */
    public String bodyText() {
      return new String(body, StandardCharsets.UTF_8);
    }
  }

  /**
   * What the endpoint answers; stored with the key and sent again on a replay, status, headers and
   * body alike.
   *
   * @param contentType sent as {@code Content-Type}; 1 to 255 visible ASCII characters and spaces
   *     (U+0020 to U+007E), not blank
   * @param headers further response headers, e.g. {@code Location}; each value in order, names
   *     compared without case. The server's own ({@code Content-Length}, {@code Transfer-Encoding},
   *     {@code Connection}), {@code Content-Type} (pass {@code contentType}) and {@link
   *     #REPLAYED_HEADER} are refused.
   */
  public record Reply(
      int status, String contentType, Map<String, List<String>> headers, byte[] body) {

    /** Longest content type accepted. */
    public static final int MAX_CONTENT_TYPE_LENGTH = 255;

    /** Longest header name accepted. */
    public static final int MAX_HEADER_NAME_LENGTH = 255;

    /** Longest header value accepted. */
    public static final int MAX_HEADER_VALUE_LENGTH = 8192;

    private static final Set<String> NOT_YOURS =
        Set.of(
            "content-type",
            "content-length",
            "transfer-encoding",
            "connection",
            "idempotent-replayed");

    public Reply {
      if (status < 200 || status > 599) {
        throw new IllegalArgumentException(
            "A reply status must be 200 to 599, got " + status + " (1xx are not final answers).");
      }
      requireContentType(contentType);
      if (headers == null) {
        throw new IllegalArgumentException(
            "The reply headers are null: pass Map.of() for a reply without further headers.");
      }
      Map<String, List<String>> copy = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
      headers.forEach(
          (name, values) -> {
            requireHeaderName(name);
            if (values == null || values.isEmpty()) {
              throw new IllegalArgumentException(
                  "The reply header \"" + name + "\" has no value: leave it out instead.");
            }
            values.forEach(value -> requireHeaderValue(name, value));
            copy.merge(
                name,
                List.copyOf(values),
                (a, b) -> Stream.concat(a.stream(), b.stream()).toList());
          });
      headers = Collections.unmodifiableMap(copy);
      body = body.clone();
    }

    /** A reply without further headers. */
    public Reply(int status, String contentType, byte[] body) {
      this(status, contentType, Map.of(), body);
    }

    /** A UTF-8 {@code application/json} reply. */
    public static Reply json(int status, String json) {
      return new Reply(status, "application/json", json.getBytes(StandardCharsets.UTF_8));
    }

    /** This reply with {@code value} added to header {@code name}, e.g. {@code Location}. */
    public Reply withHeader(String name, String value) {
      Map<String, List<String>> more = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
      more.putAll(headers);
      more.merge(name, List.of(value), (a, b) -> Stream.concat(a.stream(), b.stream()).toList());
      return new Reply(status, contentType, more, body);
    }

    @Override
    public byte[] body() {
      return body.clone();
    }

    /** The body as UTF-8 text. */
    public String bodyText() {
      return new String(body, StandardCharsets.UTF_8);
    }

    @Override
    public boolean equals(Object other) {
      return other instanceof Reply that
          && status == that.status
          && contentType.equals(that.contentType)
          && headers.equals(that.headers)
          && Arrays.equals(body, that.body);
    }

    @Override
    public int hashCode() {
      return Objects.hash(status, contentType, headers, Arrays.hashCode(body));
    }

    @Override
    public String toString() {
      return "Reply["
          + status
          + " "
          + contentType
          + ", headers "
          + headers.keySet()
          + ", "
          + body.length
          + " bytes]";
    }

    private static void requireContentType(String contentType) {
      // The JDK server writes each char of a header as its low byte: U+010D goes out as CR and
      // U+010A as LF, which would end the header and start another. Only what is written as
      // itself is accepted.
      if (!isValidContentType(contentType)) {
        throw new IllegalArgumentException(
            "The reply's content type must be 1 to "
                + MAX_CONTENT_TYPE_LENGTH
                + " visible ASCII characters and spaces (U+0020 to U+007E, no control character,"
                + " nothing beyond ASCII), e.g. \"application/json; charset=utf-8\", got: "
                + printable(contentType));
      }
    }

    static boolean isValidContentType(String contentType) {
      return contentType != null
          && !contentType.isBlank()
          && contentType.length() <= MAX_CONTENT_TYPE_LENGTH
          && contentType.chars().allMatch(c -> c >= 0x20 && c <= 0x7e);
    }

    /** Whether a header may be sent as {@code name: value}, as the constructor checks it. */
    static boolean isValidHeader(String name, String value) {
      return isValidHeaderName(name)
          && !NOT_YOURS.contains(name.toLowerCase(Locale.ROOT))
          && isValidHeaderValue(value);
    }

    private static boolean isValidHeaderName(String name) {
      return name != null
          && !name.isEmpty()
          && name.length() <= MAX_HEADER_NAME_LENGTH
          && name.chars().allMatch(Reply::isTokenChar);
    }

    private static boolean isValidHeaderValue(String value) {
      // Visible ASCII, space and tab only: a CR or LF, or a char whose low byte is one, would let
      // a value start a header of its own.
      return value != null
          && value.length() <= MAX_HEADER_VALUE_LENGTH
          && value.chars().allMatch(c -> c == '\t' || (c >= 0x20 && c < 0x7f));
    }

    private static String printable(String text) {
      return text == null ? "null" : "\"" + text.replaceAll("[^\\x20-\\x7e]", "?") + "\"";
    }

    private static void requireHeaderName(String name) {
      if (!isValidHeaderName(name)) {
        throw new IllegalArgumentException(
            "The reply header name \""
                + name
                + "\" is not an HTTP token of 1 to "
                + MAX_HEADER_NAME_LENGTH
                + " characters (letters, digits and !#$%&'*+-.^_`|~), e.g. \"Location\".");
      }
      if (NOT_YOURS.contains(name.toLowerCase(Locale.ROOT))) {
        throw new IllegalArgumentException(
            "The reply header \""
                + name
                + "\" is set by the handler or the server: pass the content type as contentType,"
                + " and leave Content-Length, Transfer-Encoding, Connection and "
                + REPLAYED_HEADER
                + " out.");
      }
    }

    private static void requireHeaderValue(String name, String value) {
      if (!isValidHeaderValue(value)) {
        throw new IllegalArgumentException(
            "The value of reply header \""
                + name
                + "\" must be at most "
                + MAX_HEADER_VALUE_LENGTH
                + " visible ASCII characters, spaces and tabs (no CR or LF), got: "
                + printable(value));
      }
    }

    private static boolean isTokenChar(int c) {
      return (c >= '0' && c <= '9')
          || (c >= 'a' && c <= 'z')
          || (c >= 'A' && c <= 'Z')
          || "!#$%&'*+-.^_`|~".indexOf(c) >= 0;
    }
  }

  /**
   * The endpoint's work for one key: write local database effects through {@link Attempt#dsl()}
   * (they commit with the stored reply), pass {@link Attempt#idempotencyKeyForDownstream()} to
   * foreign systems.
   *
   * <p>It may throw any exception, checked or not: its transaction rolls back and the keys' {@link
   * dev.nolock.idempotency.FailurePolicy} decides. A final failure is stored and answered with the
   * reply the policy maps it to; a retryable one releases the key and the request is answered 500.
   * An {@link InterruptedException} is answered the same way; the server thread's interrupt flag is
   * cleared, since the thread is the HTTP server's and an interrupt fails this request alone.
   */
  @FunctionalInterface
  public interface Endpoint {
    Reply handle(Request request, Attempt attempt) throws Exception;
  }

  private final IdempotencyKeys<Reply> keys;
  private final String scope;
  private final Endpoint endpoint;

  /** Who sent a request; null for {@link Builder#anonymous()}. */
  private final Function<HttpExchange, String> principal;

  private final int maxBodyBytes;

  private IdempotentHttpHandler(Builder builder) {
    this.keys = builder.keys;
    this.scope = builder.scope;
    this.endpoint = builder.endpoint;
    this.principal = builder.principal;
    this.maxBodyBytes = builder.maxBodyBytes;
  }

  /**
   * Stores a {@link Reply} (status, content type, headers and body) as a {@link StoredResult}, so
   * that a replay sends what the first answer sent; give it to {@link IdempotencyKeys#create} for
   * the keys this handler uses. Replies stored by the earlier format, without headers, still
   * decode. A stored content type that no {@link Reply} may have (stored before content types were
   * held to visible ASCII) decodes as {@code application/octet-stream}, and a stored header that no
   * reply may have is left out: the status and body are still replayed, and nothing is written that
   * the server could turn into a header of its own.
   */
  public static ResultCodec<Reply> replyCodec() {
    return ReplyCodec.INSTANCE;
  }

  /**
   * A handler for {@code endpoint} in {@code scope}.
   *
   * @param keys created with {@link #replyCodec()}
   * @param scope the operation, e.g. {@code "orders.create"}; also the metrics tag
   */
  public static Builder builder(IdempotencyKeys<Reply> keys, String scope, Endpoint endpoint) {
    return new Builder(keys, scope, endpoint);
  }

  /**
   * Answers the request as the class documentation says.
   *
   * <p>A 400 or 413 is sent before the request body is read to its end (a {@code Content-Length}
   * over the limit is refused before any of it is read). When a body may follow, the answer carries
   * {@code Connection: close} and {@code handle} then throws {@link BodyLeftUnreadException}, on
   * which the JDK server closes the connection without reading further. Let it propagate, and do
   * not close the exchange after it: closing an exchange makes the JDK server read what is left of
   * the body (up to {@code sun.net.httpserver.drainAmount}, 64 KiB) with no time limit, which a
   * client that stops sending turns into a thread held for ever.
   *
   * <p>The caller is settled before the body is read: a request for which {@link Builder#principal}
   * returns null, the empty string or a blank one is answered 401 and nothing runs or is stored
   * (run as anonymous, it would share the key space the handler was configured to keep apart). Put
   * the authentication in front of the handler (an {@code Authenticator} on the context answers 401
   * with its challenge); the 401 here is the fallback for a request that got past it without a
   * principal. A principal function that throws, or returns a principal {@link Caller#of} refuses,
   * is answered 500, nothing stored.
   *
   * @throws BodyLeftUnreadException after a 400, 401 or 413 was sent for a request whose body was
   *     not read to its end
   * @throws IOException when the request or the answer could not be transferred
   */
  @Override
  public void handle(HttpExchange exchange) throws IOException {
    String key;
    try {
      key = keyOf(exchange);
    } catch (InvalidIdempotencyKeyException e) {
      refuse(exchange, 400, "Missing or malformed Idempotency-Key", e.getMessage());
      return;
    }
    Caller caller;
    try {
      caller = callerOf(exchange);
    } catch (RuntimeException e) {
      // By class names only: the message may quote the principal.
      LOG.log(
          System.Logger.Level.WARNING,
          "The principal of a request in scope \""
              + scope
              + "\" could not be determined: "
              + ErrorDescriber.classNames().describe(e));
      refuse(exchange, 500, "The request failed", "The caller could not be determined.");
      return;
    }
    if (caller == null) {
      refuse(
          exchange,
          401,
          "Authentication required",
          "Authenticate: idempotency keys belong to the caller who sends them.");
      return;
    }
    byte[] body = readBody(exchange);
    if (body == null) {
      refuse(
          exchange,
          413,
          "Request body too large",
          "The body is larger than " + maxBodyBytes + " bytes.");
      return;
    }
    // The body was read to its end, so closing the exchange reads nothing more.
    try (exchange) {
      Request request =
          new Request(
              exchange.getRequestMethod(),
              exchange.getRequestURI(),
              exchange.getRequestHeaders(),
              body);
      Outcome<Reply> outcome;
      try {
        outcome =
            keys.execute(
                scope,
                caller,
                key,
                fingerprint(request.method(), request.uri(), request.headers(), body),
                a -> endpoint.handle(request, a));
      } catch (BackendUnavailableException e) {
        clearInterrupt();
        // nolock's own message, without the cause, whose driver text can quote row data.
        LOG.log(
            System.Logger.Level.WARNING,
            "Idempotency store failed in scope \"" + scope + "\": " + e.getMessage());
        problem(
            exchange,
            503,
            "Idempotency store unavailable",
            "Retry with the same Idempotency-Key.",
            Duration.ofSeconds(1));
        return;
      } catch (Exception e) {
        clearInterrupt();
        // Not "the key was released": a failed commit can leave the outcome unknown. The
        // endpoint's exception by class names only: its message may quote the request.
        LOG.log(
            System.Logger.Level.WARNING,
            "The request in scope \""
                + scope
                + "\" failed: "
                + ErrorDescriber.classNames().describe(e));
        problem(
            exchange,
            500,
            "The request failed",
            "Retry with the same Idempotency-Key: a retry runs the request again or, where this"
                + " attempt's result was stored, replays it.",
            null);
        return;
      }
      clearInterrupt();
      respond(exchange, outcome);
    }
  }

  /**
   * Clears the interrupt flag an endpoint left set (by throwing {@link InterruptedException}, or by
   * the idiom that sets the flag again and throws or returns). The thread is the HTTP server's, not
   * this request's: with the flag set it could not write the answer, and on the JDK's dispatcher
   * thread (a server without an executor) every later connection would be closed. The interrupt
   * fails or ends this request alone.
   */
  private static void clearInterrupt() {
    Thread.interrupted();
  }

  private void respond(HttpExchange exchange, Outcome<Reply> outcome) throws IOException {
    if (outcome instanceof Outcome.Completed<Reply> completed) {
      send(exchange, completed.result(), false);
    } else if (outcome instanceof Outcome.Replayed<Reply> replayed) {
      send(exchange, replayed.result(), true);
    } else if (outcome instanceof Outcome.RequestInProgress<Reply> inProgress) {
      problem(
          exchange,
          409,
          "A request with this Idempotency-Key is in progress",
          "Retry later with the same Idempotency-Key to receive its result.",
          inProgress.retryAfter());
    } else if (outcome instanceof Outcome.KeyReusedWithDifferentRequest<Reply>) {
      problem(
          exchange,
          422,
          "Idempotency-Key reused with a different request",
          "This key was first used with another request; use a new key for a new request.",
          null);
    } else if (outcome instanceof Outcome.StaleAttempt<Reply>) {
      problem(
          exchange,
          409,
          "The request was taken over by a retry",
          "Retry later with the same Idempotency-Key to receive its result.",
          Duration.ofSeconds(1));
    } else {
      throw new IllegalStateException("unknown outcome " + outcome);
    }
  }

  /**
   * The anonymous caller in anonymous mode; else the principal's, or null when the principal
   * function found none (null, empty or blank: a blank one names nobody).
   */
  private Caller callerOf(HttpExchange exchange) {
    if (principal == null) {
      return Caller.anonymous();
    }
    String who = principal.apply(exchange);
    return who == null || who.isBlank() ? null : Caller.of(who);
  }

  /**
   * The SHA-256 of method, raw path, raw query, {@code Content-Type} values and body. A part that
   * may be absent (the query, the content type) is preceded by whether it is present, so that
   * {@code /p} and {@code /p?null}, or no content type and an empty one, differ. Public so that
   * other HTTP bindings (the Spring Boot starter's) fingerprint a request exactly as this one does.
   *
   * @param uri the request's URI; only its raw path and raw query are used
   * @param headers the request's headers; only {@code Content-Type} is used, its name in any case
   */
  public static Fingerprint fingerprint(
      String method, URI uri, Map<String, List<String>> headers, byte[] body) {
    List<byte[]> parts = new ArrayList<>();
    parts.add(utf8(method));
    parts.add(utf8(uri.getRawPath()));
    String query = uri.getRawQuery();
    parts.add(utf8(query == null ? "absent" : "present"));
    parts.add(utf8(query == null ? "" : query));
    List<String> contentTypes = contentTypes(headers);
    parts.add(utf8(Integer.toString(contentTypes.size())));
    contentTypes.forEach(type -> parts.add(utf8(type)));
    parts.add(body);
    return Fingerprint.sha256(parts.toArray(byte[][]::new));
  }

  /** The request's {@code Content-Type} values, in order, whatever the case of the name. */
  private static List<String> contentTypes(Map<String, List<String>> headers) {
    List<String> values = new ArrayList<>();
    headers.forEach(
        (name, list) -> {
          if (name.equalsIgnoreCase("Content-Type")) {
            values.addAll(list);
          }
        });
    return values;
  }

  private static byte[] utf8(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  private static String keyOf(HttpExchange exchange) {
    return keyOf(exchange.getRequestHeaders().get(KEY_HEADER));
  }

  /**
   * The key from the values of the {@value #KEY_HEADER} header: sent once, bare or a Structured
   * Field string, and valid ({@link IdempotencyKeys#requireValidKey}). Public so that other HTTP
   * bindings read the header exactly as this one does.
   *
   * @param values the header's values, null or empty when it is missing
   * @throws InvalidIdempotencyKeyException when the header is missing, repeated or malformed
   */
  public static String keyOf(List<String> values) {
    if (values == null || values.isEmpty()) {
      throw new InvalidIdempotencyKeyException(
          "The Idempotency-Key header is missing: send a unique key per request, e.g. a UUID.");
    }
    if (values.size() > 1) {
      throw new InvalidIdempotencyKeyException(
          "The Idempotency-Key header was sent " + values.size() + " times: send it once.");
    }
    return IdempotencyKeys.requireValidKey(parseHeaderValue(values.get(0)));
  }

  /**
   * A header value without surrounding spaces; a quoted value is parsed as a Structured Field
   * string ({@code \"} and {@code \\} escapes only).
   */
  static String parseHeaderValue(String raw) {
    String value = raw.strip();
    if (!value.startsWith("\"")) {
      return value;
    }
    StringBuilder out = new StringBuilder(value.length());
    for (int i = 1; i < value.length(); i++) {
      char c = value.charAt(i);
      if (c == '"') {
        if (i != value.length() - 1) {
          throw new InvalidIdempotencyKeyException(
              "The Idempotency-Key has characters after its closing quote.");
        }
        return out.toString();
      }
      if (c == '\\') {
        if (i + 1 >= value.length()
            || (value.charAt(i + 1) != '"' && value.charAt(i + 1) != '\\')) {
          throw new InvalidIdempotencyKeyException(
              "The quoted Idempotency-Key has a backslash not followed by \" or \\.");
        }
        c = value.charAt(++i);
      }
      out.append(c);
    }
    throw new InvalidIdempotencyKeyException("The quoted Idempotency-Key has no closing quote.");
  }

  /** The whole body, read to its end; null, with the rest left unread, when over the limit. */
  private byte[] readBody(HttpExchange exchange) throws IOException {
    if (declaredLength(exchange) > maxBodyBytes) {
      return null;
    }
    InputStream in = exchange.getRequestBody();
    byte[] body = in.readNBytes(maxBodyBytes + 1);
    return body.length > maxBodyBytes ? null : body;
  }

  /**
   * The request's {@code Content-Length}; -1 when it has none (chunked or no body), and {@link
   * Long#MAX_VALUE} when it is not a number (the JDK server refuses those before any handler).
   */
  private static long declaredLength(HttpExchange exchange) {
    String length = exchange.getRequestHeaders().getFirst("Content-Length");
    if (length == null) {
      return -1;
    }
    try {
      return Long.parseLong(length.strip());
    } catch (NumberFormatException e) {
      return Long.MAX_VALUE;
    }
  }

  /**
   * Answers a request refused before its body was read to its end. When a body may follow, the
   * answer says {@code Connection: close} and {@link BodyLeftUnreadException} makes the server
   * close the connection instead of reading the rest, which a client could make last for ever.
   */
  private static void refuse(HttpExchange exchange, int status, String title, String detail)
      throws IOException {
    boolean bodyMayFollow =
        exchange.getRequestHeaders().containsKey("Transfer-Encoding")
            || declaredLength(exchange) > 0;
    if (!bodyMayFollow) {
      try (exchange) {
        problem(exchange, status, title, detail, null);
      }
      return;
    }
    exchange.getResponseHeaders().set("Connection", "close");
    problem(exchange, status, title, detail, null);
    throw new BodyLeftUnreadException(status);
  }

  private static void send(HttpExchange exchange, Reply reply, boolean replayed)
      throws IOException {
    exchange.getResponseHeaders().set("Content-Type", reply.contentType());
    reply
        .headers()
        .forEach(
            (name, values) -> exchange.getResponseHeaders().put(name, new ArrayList<>(values)));
    if (replayed) {
      exchange.getResponseHeaders().set(REPLAYED_HEADER, "true");
    }
    byte[] body = reply.body();
    exchange.sendResponseHeaders(reply.status(), body.length == 0 ? -1 : body.length);
    if (body.length > 0) {
      // Written, not closed: closing the response stream reads the rest of the request body,
      // which a refusal must not do; the caller closes the exchange or throws.
      OutputStream out = exchange.getResponseBody();
      out.write(body);
      out.flush();
    }
  }

  private static void problem(
      HttpExchange exchange, int status, String title, String detail, Duration retryAfter)
      throws IOException {
    if (retryAfter != null) {
      long seconds = Math.max(1, (retryAfter.toMillis() + 999) / 1000);
      exchange.getResponseHeaders().set("Retry-After", Long.toString(seconds));
    }
    String json =
        "{\"type\":\"about:blank\",\"title\":"
            + quote(title)
            + ",\"status\":"
            + status
            + ",\"detail\":"
            + quote(detail)
            + "}";
    send(exchange, new Reply(status, PROBLEM_JSON, json.getBytes(StandardCharsets.UTF_8)), false);
  }

  private static String quote(String text) {
    StringBuilder out = new StringBuilder("\"");
    for (char c : text.toCharArray()) {
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"').toString();
  }

  /**
   * Thrown by {@link #handle} once a 400, 401, 413 (or a 500 before the body was read) has been
   * sent, in full and with {@code Connection: close}, for a request whose body was not read to its
   * end: on it the JDK server closes the connection without reading further. It reports no failure;
   * a filter around the handler should let it propagate and not close the exchange.
   */
  public static final class BodyLeftUnreadException extends IOException {
    private static final long serialVersionUID = 1L;

    private final int status;

    BodyLeftUnreadException(int status) {
      super(
          "Answered "
              + status
              + " before the request body was read to its end; the connection is closed"
              + " without reading the rest");
      this.status = status;
    }

    /** The status that was sent: 400, 401, 413 or 500. */
    public int status() {
      return status;
    }
  }

  /** Builds an {@link IdempotentHttpHandler}. */
  public static final class Builder {
    private final IdempotencyKeys<Reply> keys;
    private final String scope;
    private final Endpoint endpoint;
    private Function<HttpExchange, String> principal;
    private boolean anonymous;
    private int maxBodyBytes = DEFAULT_MAX_BODY_BYTES;

    private Builder(IdempotencyKeys<Reply> keys, String scope, Endpoint endpoint) {
      this.keys = Objects.requireNonNull(keys, "keys");
      this.scope = IdempotencyKeys.requireValidScope(scope);
      this.endpoint = Objects.requireNonNull(endpoint, "endpoint");
    }

    /**
     * Who sent the request, from your authentication (e.g. {@code exchange.getPrincipal() == null ?
     * null : exchange.getPrincipal().getUsername()}), never from what the client says about itself.
     * Each principal gets a key space of its own ({@link Caller#of}): the same key from two
     * principals is two independent requests. A request for which it returns null, the empty string
     * or a blank one is answered 401, nothing run or stored.
     *
     * <p>The string must be stable: the same caller must get the same string on every request, for
     * as long as its keys are kept. Any change in how it is derived (the user name instead of
     * {@code getName()}'s {@code realm:username}, a renamed realm, case folding, an id instead of a
     * name) moves every in-flight key to a key space of its own: a retry then runs as a new
     * request, and its foreign calls run again (a double charge). Change it only once no key is in
     * progress and the clients' retry window has passed.
     */
    public Builder principal(Function<HttpExchange, String> principal) {
      Objects.requireNonNull(principal, "principal");
      requireUndecided();
      this.principal = principal;
      return this;
    }

    /**
     * Every request as the anonymous caller ({@link Caller#anonymous()}): one key space shared by
     * every client. Anyone who knows or guesses a key can learn that it exists (409, 422), receive
     * its stored response by repeating its request, or claim a predictable key first. Only for
     * endpoints whose responses are not sensitive, whose clients send unguessable keys (random
     * UUIDs).
     */
    public Builder anonymous() {
      requireUndecided();
      this.anonymous = true;
      return this;
    }

    private void requireUndecided() {
      if (principal != null || anonymous) {
        throw new IllegalStateException(
            "The caller is already set: call either principal(...) or anonymous(), once.");
      }
    }

    /** Largest request body read; larger ones are answered 413. Default 1 MiB. */
    public Builder maxBodyBytes(int bytes) {
      if (bytes < 0 || bytes > StoredResult.MAX_BODY_BYTES) {
        throw new IllegalArgumentException(
            "maxBodyBytes must be 0 to " + StoredResult.MAX_BODY_BYTES + ", got " + bytes);
      }
      this.maxBodyBytes = bytes;
      return this;
    }

    /**
     * @throws IllegalStateException when neither {@link #principal} nor {@link #anonymous()} was
     *     called
     */
    public IdempotentHttpHandler build() {
      if (principal == null && !anonymous) {
        throw new IllegalStateException(
            "Say who the callers are: principal(exchange -> <the authenticated principal>) gives"
                + " each principal its own idempotency keys; anonymous() makes every client share"
                + " one key space, where anyone who knows a key can fetch its stored response"
                + " (only for responses that are not sensitive, with random UUID keys).");
      }
      return new IdempotentHttpHandler(this);
    }
  }

  /**
   * A reply as {@link StoredResult}: its status, and as bytes (lengths are unsigned 16-bit, text is
   * UTF-8):
   *
   * <pre>{@code
   * [0x01][u16 length][content type][u16 count]([u16 length][name][u16 length][value])*[body]
   * }</pre>
   *
   * one name-value pair per header value, in order. Rows stored before headers were kept hold
   * {@code [u16 length][content type][body]}; a content type is at most 255 bytes, so their first
   * byte is 0, and they decode with no further headers. The headers live in the codec's bytes, not
   * in a column of their own: the key table stores any result as a status and bytes, and needs no
   * change for what one codec puts in them.
   */
  private static final class ReplyCodec implements ResultCodec<Reply> {
    static final ReplyCodec INSTANCE = new ReplyCodec();

    private static final byte WITH_HEADERS = 1;

    /**
     * Sent instead of a stored content type that no reply may have: the status and body are what
     * the first answer committed to, so they are still sent; RFC 9110 (8.3) lets a recipient assume
     * {@code application/octet-stream} for a body without a type, and saying so stops a browser
     * from guessing one.
     */
    static final String FALLBACK_CONTENT_TYPE = "application/octet-stream";

    @Override
    public StoredResult encode(Reply reply) {
      ByteArrayOutputStream bytes = new ByteArrayOutputStream();
      DataOutputStream out = new DataOutputStream(bytes);
      try {
        out.writeByte(WITH_HEADERS);
        writeText(out, reply.contentType());
        List<Map.Entry<String, String>> pairs = new ArrayList<>();
        reply
            .headers()
            .forEach((name, values) -> values.forEach(v -> pairs.add(Map.entry(name, v))));
        if (pairs.size() > 0xFFFF) {
          throw new IllegalArgumentException(
              "A reply with "
                  + pairs.size()
                  + " header values cannot be stored (at most 65535): send fewer headers.");
        }
        out.writeShort(pairs.size());
        for (Map.Entry<String, String> pair : pairs) {
          writeText(out, pair.getKey());
          writeText(out, pair.getValue());
        }
        out.write(reply.body());
      } catch (IOException e) {
        throw new UncheckedIOException("a ByteArrayOutputStream does not fail", e);
      }
      return StoredResult.of(reply.status(), bytes.toByteArray());
    }

    @Override
    public Reply decode(StoredResult stored) {
      ByteBuffer in = ByteBuffer.wrap(stored.body());
      boolean withHeaders = in.get(0) == WITH_HEADERS;
      if (withHeaders) {
        in.get();
      }
      String contentType = readText(in);
      if (!Reply.isValidContentType(contentType)) {
        LOG.log(
            System.Logger.Level.WARNING,
            "A stored reply's content type is not 1 to 255 visible ASCII characters (stored"
                + " before the reply checked it): replayed as "
                + FALLBACK_CONTENT_TYPE);
        contentType = FALLBACK_CONTENT_TYPE;
      }
      Map<String, List<String>> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
      if (withHeaders) {
        int count = Short.toUnsignedInt(in.getShort());
        for (int i = 0; i < count; i++) {
          String name = readText(in);
          String value = readText(in);
          if (Reply.isValidHeader(name, value)) {
            headers.computeIfAbsent(name, n -> new ArrayList<>()).add(value);
          } else {
            LOG.log(
                System.Logger.Level.WARNING,
                "A stored reply's header "
                    + Reply.printable(name)
                    + " has a name or value no reply may have: left out of the replay");
          }
        }
      }
      byte[] body = new byte[in.remaining()];
      in.get(body);
      return new Reply(stored.status(), contentType, headers, body);
    }

    private static void writeText(DataOutputStream out, String text) throws IOException {
      // Header names and values are ASCII and at most 8192 characters (Reply checks), so their
      // UTF-8 length fits the u16.
      byte[] utf8 = text.getBytes(StandardCharsets.UTF_8);
      out.writeShort(utf8.length);
      out.write(utf8);
    }

    private static String readText(ByteBuffer in) {
      byte[] utf8 = new byte[Short.toUnsignedInt(in.getShort())];
      in.get(utf8);
      return new String(utf8, StandardCharsets.UTF_8);
    }
  }

  @Override
  public String toString() {
    return "IdempotentHttpHandler[scope=" + scope + "]";
  }
}
