package dev.nolock.shedlock.internal;

import dev.nolock.patterns.Lease;
import dev.nolock.patterns.Names;

/**
 * ShedLock lock names as nolock lock names: taken unchanged, or refused. A mapping (escaping,
 * hashing) would either make two ShedLock names one nolock lock or make a name another nolock user
 * of the backend already has mean something else, and would hide the name an operator looks for.
 */
public final class ShedLockNames {

  private static final int SHOWN = 60;

  private ShedLockNames() {}

  /**
   * {@code name} unchanged when nolock can store it: not blank, at most {@link
   * Lease#MAX_NAME_LENGTH} characters, no control characters or broken surrogate pairs.
   *
   * @throws IllegalArgumentException otherwise, saying what to rename
   */
  public static String require(String name) {
    try {
      return Names.requireName("ShedLock lock name", name, Lease.MAX_NAME_LENGTH);
    } catch (IllegalArgumentException e) {
      throw new IllegalArgumentException(
          "ShedLock lock \""
              + printable(name)
              + "\" cannot be a nolock lock: "
              + e.getMessage()
              + " Rename it in @SchedulerLock(name = ...) (or the LockConfiguration); nolock"
              + " stores names unchanged rather than map them, because a mapping could make two"
              + " names one lock.",
          e);
    }
  }

  /** {@code name} for a message: control characters and lone surrogates escaped, long names cut. */
  public static String printable(String name) {
    if (name == null) {
      return "null";
    }
    StringBuilder shown = new StringBuilder();
    for (int i = 0; i < name.length() && i < SHOWN; i++) {
      char c = name.charAt(i);
      if (Character.isISOControl(c) || Character.isSurrogate(c)) {
        shown.append(String.format("\\u%04x", (int) c));
      } else {
        shown.append(c);
      }
    }
    return name.length() > SHOWN ? shown + "..." : shown.toString();
  }
}
