package dev.nolock.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Runs the annotated Spring MVC controller method once per {@code Idempotency-Key} and caller, and
 * answers every repeat of the same request with the first answer, as the IETF draft "The
 * Idempotency-Key HTTP Header Field" describes.
 *
 * <p>Guarantee: the method runs in the key's own transaction (nolock's, with the attempt check),
 * and its Spring data access ({@code JdbcTemplate}, jOOQ through Spring, {@code
 * NolockTransactions.current()}) writes in it: its writes and the stored answer commit together,
 * once per key, and the client receives the answer only after that commit. A repeat gets the stored
 * status, {@code Content-Type}, headers (such as {@code Location}) and body, byte for byte, with
 * {@code Idempotent-Replayed: true}. Other answers: 400 for a missing or malformed key, 401 when
 * the request has no principal and {@link #anonymous()} is false, 409 with {@code Retry-After}
 * while another attempt holds the key, 413 for a body over {@code
 * nolock.idempotency.max-body-bytes}, 415 for a form or multipart body, 422 when the key was used
 * with another request (method, path, query, content type and body differ), 503 with {@code
 * Retry-After} when PostgreSQL failed (the outcome may be unknown: retry with the same key). When
 * the method throws, its writes roll back, the key is released, and Spring MVC's error handling
 * answers.
 *
 * <p>The method must return {@code ResponseEntity}: its body is written as given ({@code byte[]},
 * {@code String}) or as JSON through the application's Jackson {@code JsonMapper}, the same bytes
 * on the first answer and on replays. It must be mapped to POST, PUT, PATCH or DELETE, and must not
 * be {@code @Transactional}; start-up fails naming the bean and method otherwise.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface Idempotent {

  /**
   * The operation the keys belong to, also the metrics tag; keys are unique per scope and caller.
   * Default: the controller's simple class name, a dot and the method's name.
   */
  String scope() default "";

  /**
   * Whether a request without a principal runs, in one key space shared by every such client:
   * anyone who knows or guesses a key can then learn that it exists and receive its stored answer.
   * Default false: such a request is answered 401. A request with a principal ({@code
   * HttpServletRequest.getUserPrincipal()}, which Spring Security fills in) always uses the
   * principal's own key space.
   */
  boolean anonymous() default false;
}
