package dev.nolock.spring.internal;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import java.util.ArrayList;
import java.util.List;

/**
 * The {@code locks} section of the {@code nolock} endpoint: the locks this instance holds now
 * through its {@link FencedLock} beans, with their fencing tokens. Leadership terms are in the
 * {@code elections} section.
 */
public final class LocksSection implements NolockSection {

  private final List<FencedLock> locks;

  public LocksSection(List<FencedLock> locks) {
    this.locks = List.copyOf(locks);
  }

  @Override
  public String name() {
    return "locks";
  }

  @Override
  public Object report() {
    List<Held> held = new ArrayList<>();
    for (FencedLock lock : locks) {
      for (HeldLock h : lock.held()) {
        held.add(new Held(h.name(), h.owner(), h.token().value(), h.ttl().toString()));
      }
    }
    return held;
  }

  /**
   * One held lock.
   *
   * @param name the lock's name
   * @param owner the owner this instance holds it as
   * @param token its fencing token
   * @param ttl its lease's time to live (ISO-8601)
   */
  public record Held(String name, String owner, long token, String ttl) {}
}
