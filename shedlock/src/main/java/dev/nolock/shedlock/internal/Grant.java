package dev.nolock.shedlock.internal;

import dev.nolock.lock.HeldLock;

/**
 * One grant handed to ShedLock: the nolock lease, and the holder's clock reading from just before
 * it was asked for (what lockAtLeastFor of an extension counts from). Finished once unlocked or
 * found lost by an extension; a finished grant is no longer the thread's.
 */
final class Grant {

  private final HeldLock held;
  private final long askedNanos;
  private volatile boolean finished;

  Grant(HeldLock held, long askedNanos) {
    this.held = held;
    this.askedNanos = askedNanos;
  }

  HeldLock held() {
    return held;
  }

  long askedNanos() {
    return askedNanos;
  }

  boolean finished() {
    return finished;
  }

  void finish() {
    finished = true;
  }
}
