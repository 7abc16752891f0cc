package dev.nolock.spring.internal;

import dev.nolock.idempotency.Caller;
import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.InvalidIdempotencyKeyException;
import dev.nolock.idempotency.Outcome;
import dev.nolock.idempotency.http.IdempotentHttpHandler;
import dev.nolock.idempotency.http.IdempotentHttpHandler.Reply;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.spring.Idempotent;
import jakarta.servlet.http.HttpServletRequest;
import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.UndeclaredThrowableException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.charset.StandardCharsets;
import java.security.Principal;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import javax.sql.DataSource;
import org.aopalliance.intercept.MethodInterceptor;
import org.aopalliance.intercept.MethodInvocation;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.http.HttpHeaders;
import org.springframework.http.MediaType;
import org.springframework.http.ResponseEntity;
import org.springframework.transaction.support.TransactionSynchronization;
import org.springframework.util.ClassUtils;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.context.request.ServletRequestAttributes;
import tools.jackson.databind.json.JsonMapper;

/**
 * Runs an {@link Idempotent} controller method through {@link IdempotencyKeys}: once per key and
 * caller, in the key's own transaction, its answer stored and replayed.
 *
 * <ol>
 *   <li>Reads the key ({@link IdempotentHttpHandler#keyOf}; 400), the caller (the request's
 *       principal, else anonymous where the method allows it; 401) and the raw body (kept by {@link
 *       IdempotentBodies} when a {@code @RequestBody} read it, else read here; 413, and 415 for a
 *       form body, whose parameters the container may have consumed).
 *   <li>Fingerprints the request as {@link IdempotentHttpHandler#fingerprint} does.
 *   <li>Runs the method as the key's action with the action's transaction bound for Spring data
 *       access ({@link BoundTransactions}), turning its {@code ResponseEntity} into a {@link Reply}
 *       (the bytes stored and sent).
 *   <li>Answers from the outcome: the reply (marked when replayed), 409, 422; PostgreSQL failing is
 *       503. The method's own exception reaches Spring MVC unchanged (the key was released).
 * </ol>
 */
public final class IdempotentRequests implements MethodInterceptor {

  private static final Logger log = LoggerFactory.getLogger(IdempotentRequests.class);
  private static final String PROBLEM_JSON = "application/problem+json";

  /** Headers a stored reply does not carry: the server's own, and the content type (apart). */
  private static final Set<String> NOT_STORED =
      Set.of("content-type", "content-length", "transfer-encoding", "connection");

  private final ObjectProvider<IdempotencyKeys<Reply>> keys;
  private final ObjectProvider<DataSource> dataSource;
  private final ObjectProvider<JsonMapper> json;
  private final int maxBodyBytes;

  public IdempotentRequests(
      ObjectProvider<IdempotencyKeys<Reply>> keys,
      ObjectProvider<DataSource> dataSource,
      ObjectProvider<JsonMapper> json,
      int maxBodyBytes) {
    this.keys = keys;
    this.dataSource = dataSource;
    this.json = json;
    this.maxBodyBytes = maxBodyBytes;
  }

  /** The scope of {@code method}: its annotation's, or "SimpleClassName.method". */
  static String scopeOf(Method method, Idempotent annotation) {
    return annotation.scope().isEmpty()
        ? ClassUtils.getUserClass(method.getDeclaringClass()).getSimpleName()
            + "."
            + method.getName()
        : annotation.scope();
  }

  @Override
  public Object invoke(MethodInvocation invocation) throws Throwable {
    Method method = invocation.getMethod();
    Idempotent annotation = AnnotatedElementUtils.findMergedAnnotation(method, Idempotent.class);
    if (annotation == null
        || !(RequestContextHolder.getRequestAttributes() instanceof ServletRequestAttributes web)) {
      // Called from elsewhere than a request (a test, another bean): nothing to key it by.
      return invocation.proceed();
    }
    HttpServletRequest request = web.getRequest();
    String scope = scopeOf(method, annotation);
    String key;
    try {
      key =
          IdempotentHttpHandler.keyOf(
              Collections.list(request.getHeaders(IdempotentHttpHandler.KEY_HEADER)));
    } catch (InvalidIdempotencyKeyException e) {
      return problem(400, "Missing or malformed Idempotency-Key", e.getMessage(), null);
    }
    Principal principal = request.getUserPrincipal();
    Caller caller;
    if (principal != null && principal.getName() != null && !principal.getName().isBlank()) {
      caller = Caller.of(principal.getName());
    } else if (annotation.anonymous()) {
      caller = Caller.anonymous();
    } else {
      return problem(
          401,
          "Authentication required",
          "Authenticate: idempotency keys belong to the caller who sends them.",
          null);
    }
    byte[] body = (byte[]) web.getAttribute(IdempotentBodies.BODY, RequestAttributes.SCOPE_REQUEST);
    if (body == null) {
      String type = request.getContentType();
      if (type != null
          && (type.toLowerCase(Locale.ROOT).startsWith("application/x-www-form-urlencoded")
              || type.toLowerCase(Locale.ROOT).startsWith("multipart/"))) {
        return problem(
            415,
            "Unsupported body",
            "An idempotent request carries its body as JSON or bytes, not as form fields.",
            null);
      }
      body = IdempotentBodies.read(request.getInputStream(), maxBodyBytes);
      if (body == null) {
        return problem(
            413,
            "Request body too large",
            "The body is larger than " + maxBodyBytes + " bytes.",
            null);
      }
    }
    Map<String, List<String>> headers = new TreeMap<>(String.CASE_INSENSITIVE_ORDER);
    if (request.getContentType() != null) {
      headers.put(
          HttpHeaders.CONTENT_TYPE, Collections.list(request.getHeaders(HttpHeaders.CONTENT_TYPE)));
    }
    String query = request.getQueryString();
    URI uri;
    try {
      uri = new URI(request.getRequestURI() + (query == null ? "" : "?" + query));
    } catch (URISyntaxException e) {
      // The container let through characters a URI may not hold (relaxed-query-chars).
      return problem(
          400, "Malformed request URI", "Encode the path and query as RFC 3986 has it.", null);
    }
    // Callbacks the method registered (an AFTER_COMMIT event listener's) run only once the key's
    // transaction is known to have committed, never for a superseded or failed attempt.
    List<TransactionSynchronization> callbacks = new ArrayList<>();
    Outcome<Reply> outcome;
    try {
      outcome =
          keys.getObject()
              .execute(
                  scope,
                  caller,
                  key,
                  IdempotentHttpHandler.fingerprint(request.getMethod(), uri, headers, body),
                  attempt -> {
                    // An earlier attempt's were rolled back with it.
                    BoundTransactions.afterRollback(callbacks, false);
                    callbacks.clear();
                    return BoundTransactions.call(
                        dataSource.getObject(),
                        attempt.dsl(),
                        () -> toReply(method, proceed(invocation)),
                        callbacks);
                  });
    } catch (BackendUnavailableException e) {
      BoundTransactions.afterRollback(callbacks, true);
      // nolock's own message, without the cause, whose driver text can quote row data.
      log.warn("Idempotency store failed in scope \"{}\": {}", scope, e.getMessage());
      return problem(
          503,
          "Idempotency store unavailable",
          "Retry with the same Idempotency-Key.",
          Duration.ofSeconds(1));
    } catch (Throwable e) {
      BoundTransactions.afterRollback(callbacks, false);
      throw e;
    }
    if (outcome instanceof Outcome.Completed<Reply>) {
      BoundTransactions.afterCommit(callbacks);
    } else {
      BoundTransactions.afterRollback(callbacks, false);
    }
    if (outcome instanceof Outcome.Completed<Reply> completed) {
      return answer(completed.result(), false);
    }
    if (outcome instanceof Outcome.Replayed<Reply> replayed) {
      return answer(replayed.result(), true);
    }
    if (outcome instanceof Outcome.RequestInProgress<Reply> inProgress) {
      return problem(
          409,
          "Request in progress",
          "A request with this Idempotency-Key is being processed: retry later.",
          inProgress.retryAfter());
    }
    if (outcome instanceof Outcome.KeyReusedWithDifferentRequest<Reply>) {
      return problem(
          422,
          "Idempotency-Key reused",
          "This Idempotency-Key was used with a different request: use a new key.",
          null);
    }
    return problem(
        409,
        "Request superseded",
        "This attempt was taken over by a retry: ask again for its answer.",
        Duration.ZERO);
  }

  /** The method's result; what it throws, unchanged (an {@link Error} too). */
  private static Object proceed(MethodInvocation invocation) throws Exception {
    try {
      return invocation.proceed();
    } catch (Exception | Error e) {
      throw e;
    } catch (Throwable t) {
      throw new UndeclaredThrowableException(t);
    }
  }

  private Reply toReply(Method method, Object returned) throws IOException {
    if (!(returned instanceof ResponseEntity<?> entity)) {
      throw new IllegalStateException(
          "@Idempotent method " + method.toGenericString() + " returned no ResponseEntity");
    }
    Object body = entity.getBody();
    String declared =
        entity.getHeaders().getContentType() == null
            ? null
            : entity.getHeaders().getContentType().toString();
    String contentType;
    byte[] bytes;
    if (body instanceof byte[] raw) {
      bytes = raw;
      contentType = declared != null ? declared : "application/octet-stream";
    } else if (body instanceof String text) {
      MediaType type = entity.getHeaders().getContentType();
      bytes =
          text.getBytes(
              type != null && type.getCharset() != null
                  ? type.getCharset()
                  : StandardCharsets.UTF_8);
      contentType = declared != null ? declared : "text/plain;charset=UTF-8";
    } else if (body == null) {
      bytes = new byte[0];
      contentType = declared != null ? declared : "application/json";
    } else {
      JsonMapper mapper = json.getIfUnique();
      if (mapper == null) {
        throw new IllegalStateException(
            "@Idempotent method "
                + method.toGenericString()
                + " returned a body of type "
                + body.getClass().getName()
                + ", written as JSON, but the application has no Jackson JsonMapper bean: add"
                + " spring-boot-jackson, or return String or byte[].");
      }
      bytes = mapper.writeValueAsBytes(body);
      contentType = declared != null ? declared : "application/json";
    }
    Map<String, List<String>> headers = new LinkedHashMap<>();
    entity
        .getHeaders()
        .forEach(
            (name, values) -> {
              if (!NOT_STORED.contains(name.toLowerCase(Locale.ROOT))) {
                headers.put(name, values);
              }
            });
    return new Reply(entity.getStatusCode().value(), contentType, headers, bytes);
  }

  private static ResponseEntity<byte[]> answer(Reply reply, boolean replayed) {
    ResponseEntity.BodyBuilder answer =
        ResponseEntity.status(reply.status()).header(HttpHeaders.CONTENT_TYPE, reply.contentType());
    reply.headers().forEach((name, values) -> answer.header(name, values.toArray(String[]::new)));
    if (replayed) {
      answer.header(IdempotentHttpHandler.REPLAYED_HEADER, "true");
    }
    return answer.body(reply.body());
  }

  /** An RFC 9457 problem, as the IETF draft's examples answer. */
  private static ResponseEntity<byte[]> problem(
      int status, String title, String detail, Duration retryAfter) {
    ResponseEntity.BodyBuilder answer =
        ResponseEntity.status(status).header(HttpHeaders.CONTENT_TYPE, PROBLEM_JSON);
    if (retryAfter != null) {
      // Whole seconds, rounded up: "0" would invite an immediate retry that finds the same lease.
      long seconds = Math.max(1, (retryAfter.toMillis() + 999) / 1000);
      answer.header(HttpHeaders.RETRY_AFTER, Long.toString(seconds));
    }
    String json =
        "{\"type\":\"about:blank\",\"title\":"
            + quote(title)
            + ",\"status\":"
            + status
            + ",\"detail\":"
            + quote(detail)
            + "}";
    return answer.body(json.getBytes(StandardCharsets.UTF_8));
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
}
