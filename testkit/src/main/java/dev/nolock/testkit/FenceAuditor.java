package dev.nolock.testkit;

import dev.nolock.patterns.FencingToken;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * Records every protected write a test attempted and what the resource answered, and reports a
 * stale write that the resource accepted: the lost update a fencing token exists to prevent.
 *
 * <p>A write is stale when, for the same lock, the resource had already accepted a higher token, or
 * the same token from another owner. The auditor judges acceptances in the order they were
 * recorded, so record {@link #accepted} right after the write's commit returned, from scenarios
 * whose writes are ordered (one arrives after the other); for free-for-all races check the final
 * state of the resource instead.
 *
 * <p>A rejection test must also show that the rejected write was attempted ("every late write was
 * refused" is true of zero writes): use {@link #attempts(String)} and {@link #refusals(String)}.
 * Thread-safe.
 */
public final class FenceAuditor {

  /** What happened to one write. */
  public enum Outcome {
    ATTEMPTED,
    ACCEPTED,
    REFUSED
  }

  /** One line of the audit log. */
  public record Entry(
      int sequence, String lock, FencingToken token, String owner, Outcome outcome) {
    @Override
    public String toString() {
      return String.format(
          "#%d %-9s lock=%s token=%d owner=%s", sequence, outcome, lock, token.value(), owner);
    }
  }

  private final List<Entry> entries = new ArrayList<>();

  /** The write is about to be sent. */
  public synchronized void attempted(String lock, FencingToken token, String owner) {
    add(lock, token, owner, Outcome.ATTEMPTED);
  }

  /** The resource accepted the write (its commit returned). */
  public synchronized void accepted(String lock, FencingToken token, String owner) {
    add(lock, token, owner, Outcome.ACCEPTED);
  }

  /** The resource refused the write. */
  public synchronized void refused(String lock, FencingToken token, String owner) {
    add(lock, token, owner, Outcome.REFUSED);
  }

  /** Writes attempted by {@code owner}. */
  public synchronized long attempts(String owner) {
    return count(owner, Outcome.ATTEMPTED);
  }

  /** Writes by {@code owner} the resource accepted. */
  public synchronized long acceptances(String owner) {
    return count(owner, Outcome.ACCEPTED);
  }

  /** Writes by {@code owner} the resource refused. */
  public synchronized long refusals(String owner) {
    return count(owner, Outcome.REFUSED);
  }

  /**
   * Accepted writes that carried a token lower than (or equal to, from another owner) one accepted
   * before.
   */
  public synchronized List<Entry> staleAcceptances() {
    Map<String, Entry> newest = new HashMap<>();
    List<Entry> stale = new ArrayList<>();
    for (Entry entry : entries) {
      if (entry.outcome() != Outcome.ACCEPTED) {
        continue;
      }
      Entry before = newest.get(entry.lock());
      if (before == null || entry.token().isNewerThan(before.token())) {
        newest.put(entry.lock(), entry);
      } else if (before.token().isNewerThan(entry.token())
          || !before.owner().equals(entry.owner())) {
        stale.add(entry);
      }
    }
    return List.copyOf(stale);
  }

  /**
   * Fails with the timeline when a stale write was accepted.
   *
   * @throws AssertionError naming each lost update
   */
  public synchronized void assertNoStaleWriteAccepted() {
    List<Entry> stale = staleAcceptances();
    if (!stale.isEmpty()) {
      throw new AssertionError(
          "Lost update: the resource accepted "
              + stale.size()
              + " stale write(s) "
              + stale
              + " after a newer token had written.\nTimeline:\n"
              + timeline());
    }
  }

  /** Every recorded entry, one per line, in order. */
  public synchronized String timeline() {
    StringBuilder out = new StringBuilder();
    entries.forEach(e -> out.append("  ").append(e).append('\n'));
    return out.toString();
  }

  private void add(String lock, FencingToken token, String owner, Outcome outcome) {
    entries.add(
        new Entry(
            entries.size() + 1,
            Objects.requireNonNull(lock, "lock"),
            Objects.requireNonNull(token, "token"),
            Objects.requireNonNull(owner, "owner"),
            outcome));
  }

  private long count(String owner, Outcome outcome) {
    return entries.stream().filter(e -> e.owner().equals(owner) && e.outcome() == outcome).count();
  }
}
