package dev.nolock.schedule.internal;

import dev.nolock.patterns.Lease;
import java.security.SecureRandom;
import java.util.HexFormat;

/**
 * The identity a scheduler instance stores in its claims: the configured owner, {@value
 * #SEPARATOR}, and a random nonce of {@value #NONCE_LENGTH} hex digits made when the instance is
 * created. The owner is for people and may be shared (a service name, a pod template); the nonce
 * makes the identity unique per instance, so that recognising "my own claim" after a lost answer
 * can never pick up another live instance's claim.
 */
public final class InstanceIdentity {

  /** What separates the configured owner from the nonce. */
  public static final char SEPARATOR = '#';

  /** Hex digits of the nonce (64 random bits). */
  public static final int NONCE_LENGTH = 16;

  /** The longest configured owner that still fits the owner column with its nonce. */
  public static final int MAX_OWNER_LENGTH = Lease.MAX_OWNER_LENGTH - 1 - NONCE_LENGTH;

  private static final SecureRandom RANDOM = new SecureRandom();

  private InstanceIdentity() {}

  /** A new instance's identity: {@code owner#<16 random hex digits>}. */
  public static String of(String owner) {
    if (owner.length() > MAX_OWNER_LENGTH) {
      throw new IllegalArgumentException(
          "The owner is " + owner.length() + " characters long, more than " + MAX_OWNER_LENGTH);
    }
    return owner + SEPARATOR + HexFormat.of().toHexDigits(RANDOM.nextLong());
  }
}
