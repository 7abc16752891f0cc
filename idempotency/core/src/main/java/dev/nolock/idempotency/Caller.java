package dev.nolock.idempotency;

/**
 * Who sends a request: the owner of its idempotency key. Keys are unique per {@code (scope, caller,
 * key)}, so two callers never share a key: the same key from two principals is two independent
 * requests, and neither can learn whether the other used a key, receive its stored result, or claim
 * it first.
 *
 * <p>{@link #of(String)} is an authenticated principal (a user id, an account id, a client
 * certificate's subject), taken from your authentication, never from the request body. {@link
 * #anonymous()} is one key space shared by every unauthenticated caller: anyone who knows or
 * guesses a key can learn that it exists, receive its stored result by repeating its request, or
 * claim a predictable key first. Use it only for endpoints whose results are not sensitive, with
 * unguessable keys (random UUIDs).
 *
 * <p>The anonymous caller is stored as the empty principal, which {@link #of(String)} refuses, so
 * the two never collide. {@link #toString()} never prints the principal (it is often an e-mail or a
 * user id); it is not a metrics tag and is not logged.
 */
public final class Caller {

  /** Longest principal. */
  public static final int MAX_PRINCIPAL_LENGTH = 255;

  private static final Caller ANONYMOUS = new Caller("");

  private final String principal;

  private Caller(String principal) {
    this.principal = principal;
  }

  /**
   * The caller authenticated as {@code principal}.
   *
   * @param principal 1 to {@value #MAX_PRINCIPAL_LENGTH} characters, not blank, no control
   *     characters, no half of a surrogate pair
   * @throws IllegalArgumentException naming the broken rule, without echoing the principal
   */
  public static Caller of(String principal) {
    if (principal == null || principal.isBlank()) {
      throw new IllegalArgumentException(
          "The principal is "
              + (principal == null ? "null" : "empty or blank")
              + ": pass the authenticated caller's id, or Caller.anonymous() for a request"
              + " without authentication (every anonymous caller then shares one key space).");
    }
    if (principal.length() > MAX_PRINCIPAL_LENGTH) {
      throw new IllegalArgumentException(
          "The principal is "
              + principal.length()
              + " characters long, more than "
              + MAX_PRINCIPAL_LENGTH
              + ": pass a shorter id (e.g. the account id, or a hash of a long subject).");
    }
    for (int i = 0; i < principal.length(); i++) {
      char c = principal.charAt(i);
      boolean paired =
          Character.isHighSurrogate(c)
              ? i + 1 < principal.length() && Character.isLowSurrogate(principal.charAt(i + 1))
              : !Character.isLowSurrogate(c)
                  || (i > 0 && Character.isHighSurrogate(principal.charAt(i - 1)));
      if (!paired) {
        // UTF-8 encodes a lone surrogate as '?': "a\uD800" and "a?" would be one caller.
        throw new IllegalArgumentException(
            "The principal contains half of a surrogate pair at index "
                + i
                + ": pass well-formed text (a whole character, not a broken UTF-16 string).");
      }
      if (Character.isISOControl(c)) {
        throw new IllegalArgumentException(
            "The principal contains a control character at index "
                + i
                + ": pass the caller's id in printable characters.");
      }
    }
    return new Caller(principal);
  }

  /** Every unauthenticated caller: one shared key space (see the class documentation). */
  public static Caller anonymous() {
    return ANONYMOUS;
  }

  public boolean isAnonymous() {
    return principal.isEmpty();
  }

  /** The principal as stored in the keys table: the empty string for {@link #anonymous()}. */
  public String principal() {
    return principal;
  }

  @Override
  public boolean equals(Object other) {
    return other instanceof Caller that && principal.equals(that.principal);
  }

  @Override
  public int hashCode() {
    return principal.hashCode();
  }

  /** {@code Caller[anonymous]} or {@code Caller[principal]}: never the principal itself. */
  @Override
  public String toString() {
    return isAnonymous() ? "Caller[anonymous]" : "Caller[principal]";
  }
}
