package dev.nolock.testkit;

import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import io.vavr.control.Either;
import io.vavr.control.Option;
import java.util.HashMap;
import java.util.Map;

/**
 * The server of the versioned-store negative controls: keys with values and versions in memory,
 * each request applied atomically, versions from one counter so that none repeats, also across a
 * delete and a re-insert. {@link LostAnswerVersions} is its client.
 */
final class InMemoryVersions {

  private final Map<String, Versioned<Long>> rows = new HashMap<>();
  private long versions;

  synchronized Option<Versioned<Long>> read(String id) {
    return Option.of(rows.get(id));
  }

  synchronized Either<Conflict, Versioned<Long>> insert(String id, long value) {
    if (rows.containsKey(id)) {
      return Either.left(conflict(id));
    }
    return Either.right(put(id, value));
  }

  synchronized Either<Conflict, Versioned<Long>> compareAndSet(
      String id, Version expected, long value) {
    Versioned<Long> row = rows.get(id);
    if (row == null || !row.version().equals(expected)) {
      return Either.left(conflict(id));
    }
    return Either.right(put(id, value));
  }

  synchronized Either<Conflict, Version> delete(String id, Version expected) {
    Versioned<Long> row = rows.get(id);
    if (row == null || !row.version().equals(expected)) {
      return Either.left(conflict(id));
    }
    rows.remove(id);
    return Either.right(expected);
  }

  /** A write with no condition: a naive client's repair. */
  synchronized Versioned<Long> put(String id, long value) {
    Versioned<Long> row = new Versioned<>(value, Version.of(++versions));
    rows.put(id, row);
    return row;
  }

  synchronized void remove(String id) {
    rows.remove(id);
  }

  private Conflict conflict(String id) {
    return new Conflict(id, read(id).map(Versioned::version));
  }
}
