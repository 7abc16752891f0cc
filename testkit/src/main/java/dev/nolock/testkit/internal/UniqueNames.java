package dev.nolock.testkit.internal;

import java.security.SecureRandom;
import java.util.HexFormat;

/**
 * Random name parts, so test classes that share one server (a developer's, CI's, or several JVMs at
 * once) never see each other's schemas, keys or topics.
 */
public final class UniqueNames {

  private static final SecureRandom RANDOM = new SecureRandom();

  private UniqueNames() {}

  /**
   * 12 lowercase hex digits (48 random bits): safe in SQL identifiers, Redis keys and topic names.
   */
  public static String hex12() {
    byte[] bytes = new byte[6];
    RANDOM.nextBytes(bytes);
    return HexFormat.of().formatHex(bytes);
  }
}
