package dev.nolock.patterns;

import java.security.SecureRandom;
import java.util.HexFormat;

/**
 * The owner identity of one grant: a process's owner plus a random nonce, {@code owner#nonce}.
 *
 * <p>Why per grant: a backend can hand a token out again (a Redis restart without persistence, a
 * lease item deleted by an operator), and then two threads of one process could hold grants with
 * equal tokens. If both carried the process's owner, the {@code dev.nolock.patterns.sql.Fence}
 * would take one for the other and both would write, and one thread's renew or release would act on
 * the other's lease. With a nonce per grant, an equal token passes the fence only for the very same
 * grant.
 *
 * <p>The nonce is 64 random bits from {@link SecureRandom}; a process owner may be at most {@link
 * #MAX_PROCESS_OWNER_LENGTH} characters, so that the grant owner fits {@link
 * Lease#MAX_OWNER_LENGTH}.
 */
public final class GrantOwner {

  /** The separator between the process owner and the nonce. */
  public static final char SEPARATOR = '#';

  private static final int NONCE_LENGTH = 16;

  /** Longest process owner: room is left for the separator and the 16 hex digits of the nonce. */
  public static final int MAX_PROCESS_OWNER_LENGTH = Lease.MAX_OWNER_LENGTH - 1 - NONCE_LENGTH;

  private static final SecureRandom RANDOM = new SecureRandom();

  private GrantOwner() {}

  /**
   * Validates a process owner at the API edge.
   *
   * @throws IllegalArgumentException when it is blank, too long or not printable, with a message
   *     that says how to fix it
   */
  public static String requireProcessOwner(String what, String owner) {
    if (owner != null && owner.length() > MAX_PROCESS_OWNER_LENGTH) {
      throw new IllegalArgumentException(
          "The "
              + what
              + " is "
              + owner.length()
              + " characters long, more than "
              + MAX_PROCESS_OWNER_LENGTH
              + ": each grant appends \"#\" and a 16-digit nonce and a stored owner holds at most "
              + Lease.MAX_OWNER_LENGTH
              + " characters; shorten it or hash the long part (\""
              + owner.substring(0, 20)
              + "...\").");
    }
    return Names.requireName(what, owner, MAX_PROCESS_OWNER_LENGTH);
  }

  /** A new grant owner for {@code processOwner}: {@code processOwner#<16 hex digits>}. */
  public static String newGrant(String processOwner) {
    requireProcessOwner("process owner", processOwner);
    return processOwner + SEPARATOR + HexFormat.of().toHexDigits(RANDOM.nextLong());
  }

  /**
   * The process owner of a grant owner made by {@link #newGrant}, or the value itself when it has
   * no nonce (a backend written to by other code).
   */
  public static String processOf(String grantOwner) {
    int at = grantOwner.lastIndexOf(SEPARATOR);
    if (at < 0 || grantOwner.length() - at - 1 != NONCE_LENGTH) {
      return grantOwner;
    }
    for (int i = at + 1; i < grantOwner.length(); i++) {
      if (Character.digit(grantOwner.charAt(i), 16) < 0) {
        return grantOwner;
      }
    }
    return grantOwner.substring(0, at);
  }
}
