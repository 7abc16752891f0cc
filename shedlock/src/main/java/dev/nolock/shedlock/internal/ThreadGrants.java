package dev.nolock.shedlock.internal;

import dev.nolock.lock.HeldLock;
import io.vavr.control.Option;
import java.util.ArrayDeque;
import java.util.Deque;

/**
 * The grants a thread holds through ShedLock, innermost first. ShedLock runs a locked method on the
 * thread that called {@code lock}, and unlocks it on that thread, so binding a grant there from
 * {@code lock} to {@code unlock} makes it the method's.
 *
 * <p>A grant unlocked on another thread is marked finished there and dropped from its own thread's
 * stack the next time that thread binds or looks, so it is never reported held and never kept long.
 */
public final class ThreadGrants {

  private static final ThreadLocal<Deque<Grant>> BOUND = new ThreadLocal<>();

  private ThreadGrants() {}

  static void bind(Grant grant) {
    Deque<Grant> grants = BOUND.get();
    if (grants == null) {
      grants = new ArrayDeque<>();
      BOUND.set(grants);
    }
    grants.removeIf(Grant::finished);
    grants.push(grant);
  }

  static void unbind(Grant grant) {
    grant.finish();
    Deque<Grant> grants = BOUND.get();
    if (grants != null) {
      grants.remove(grant);
      if (grants.isEmpty()) {
        BOUND.remove();
      }
    }
  }

  /** The innermost grant this thread holds, if any. */
  public static Option<HeldLock> innermost() {
    return grants().headOption().map(Grant::held);
  }

  /** The innermost grant this thread holds on {@code name}, if any. */
  public static Option<HeldLock> named(String name) {
    return grants().find(g -> g.held().name().equals(name)).map(Grant::held);
  }

  private static io.vavr.collection.List<Grant> grants() {
    Deque<Grant> grants = BOUND.get();
    if (grants == null) {
      return io.vavr.collection.List.empty();
    }
    grants.removeIf(Grant::finished);
    if (grants.isEmpty()) {
      BOUND.remove();
    }
    return io.vavr.collection.List.ofAll(grants);
  }
}
