package dev.nolock.patterns;

import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;

/**
 * A failure's cause chain, for code that classifies failures by what they were caused by. Written
 * here because {@link Throwable#getCause()} chains can loop ({@code initCause} refuses only a
 * failure as its own cause, not a longer cycle), and a walk that does not stop at a repeat spins a
 * runner's thread at full CPU forever.
 */
public final class Causes {

  private Causes() {}

  /** {@code failure} and then each cause, each exception once; empty for null. */
  public static List<Throwable> of(Throwable failure) {
    Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    List<Throwable> chain = new ArrayList<>();
    for (Throwable t = failure; t != null && seen.add(t); t = t.getCause()) {
      chain.add(t);
    }
    return chain;
  }
}
