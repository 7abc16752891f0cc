package dev.nolock.lock.redis.internal;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.HexFormat;
import java.util.Objects;

/**
 * A Lua script run by its SHA-1 ({@code EVALSHA}), falling back to {@code EVAL} when the server
 * does not have it cached ({@code NOSCRIPT}: after a restart, a failover or {@code SCRIPT FLUSH});
 * {@link BoundedScriptCall} runs it. The {@code EVAL} caches the script again, so the next call is
 * an {@code EVALSHA} that hits.
 *
 * <p>The digest is computed here, so nothing is sent to the server when the script is created.
 * Immutable and thread-safe.
 */
public final class LuaScript {

  private final String name;
  private final String source;
  private final String sha;

  /** A script called {@code name} (for messages) with the Lua {@code source}. */
  public LuaScript(String name, String source) {
    this.name = Objects.requireNonNull(name, "name");
    this.source = Objects.requireNonNull(source, "source");
    this.sha = sha1Hex(source);
  }

  /** What the script is called in messages. */
  public String name() {
    return name;
  }

  /** The Lua source. */
  public String source() {
    return source;
  }

  /** The lowercase hex SHA-1 of the source, as {@code SCRIPT LOAD} returns it. */
  public String sha() {
    return sha;
  }

  private static String sha1Hex(String source) {
    try {
      MessageDigest sha1 = MessageDigest.getInstance("SHA-1");
      return HexFormat.of().formatHex(sha1.digest(source.getBytes(StandardCharsets.UTF_8)));
    } catch (NoSuchAlgorithmException e) {
      throw new IllegalStateException("Every Java platform must provide SHA-1", e);
    }
  }

  @Override
  public String toString() {
    return "LuaScript[" + name + ", " + sha + "]";
  }
}
