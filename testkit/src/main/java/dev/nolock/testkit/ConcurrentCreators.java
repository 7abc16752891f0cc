package dev.nolock.testkit;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;
import java.util.function.Function;
import org.assertj.core.api.Assertions;

/**
 * Races several callers of a module's {@code createTableIfMissing} on a table that does not exist
 * yet, as processes that start at once do, and asserts that none fails and the table is there.
 *
 * <p>Why it is needed: PostgreSQL's {@code CREATE TABLE IF NOT EXISTS} (and {@code CREATE INDEX IF
 * NOT EXISTS}) checks for the relation before it inserts the catalog rows, so two creators that
 * both find it missing both insert, and the loser fails with SQLState {@code 23505} (the row type's
 * entry in {@code pg_type}), {@code 42P07} or {@code 42710} instead of finding the winner's table.
 *
 * <p>Each round uses a table name no earlier round used, in {@code schema}; even rounds pass it
 * unqualified (the search path resolves it), odd rounds qualified with the schema. {@link #THREADS}
 * callers wait at a barrier and then call {@code create} at once. After all rounds, the failures
 * (round, caller and exception) must be none, and every round's table must exist.
 */
public final class ConcurrentCreators {

  /** How many callers race in each round. */
  public static final int THREADS = 8;

  private ConcurrentCreators() {}

  /**
   * Runs {@code rounds} races; see the class Javadoc.
   *
   * @param tablePrefix the start of each round's table name, which ends in {@code _<round>}; short
   *     enough that the module's derived names (indexes, sequences) stay within 63 characters
   * @param prepare what each caller does before the barrier with the round's table name: build the
   *     module's object on {@code schema}'s data source (so that building it does not stagger the
   *     calls); closed after the call if it is {@link AutoCloseable}
   * @param create the call that races: the object's {@code createTableIfMissing}
   */
  public static <T> void assertAllSucceed(
      PostgresSchema schema,
      String tablePrefix,
      int rounds,
      Function<String, T> prepare,
      Consumer<T> create) {
    warmUp(schema);
    List<String> failures = new ArrayList<>();
    List<String> tables = new ArrayList<>();
    ExecutorService callers = Executors.newFixedThreadPool(THREADS);
    try {
      for (int round = 0; round < rounds; round++) {
        String base = tablePrefix + "_" + round;
        String table = round % 2 == 0 ? base : schema.schemaName() + "." + base;
        tables.add(schema.schemaName() + "." + base);
        CyclicBarrier start = new CyclicBarrier(THREADS);
        List<Future<?>> calls = new ArrayList<>();
        for (int caller = 0; caller < THREADS; caller++) {
          calls.add(
              callers.submit(
                  () -> {
                    T creator = prepare.apply(table);
                    try {
                      start.await();
                      create.accept(creator);
                    } finally {
                      if (creator instanceof AutoCloseable closeable) {
                        closeable.close();
                      }
                    }
                    return null;
                  }));
        }
        for (int caller = 0; caller < THREADS; caller++) {
          try {
            // A bound against a hang, not a timing assertion: a call takes milliseconds.
            calls.get(caller).get(60, TimeUnit.SECONDS);
          } catch (ExecutionException e) {
            failures.add("round " + round + ", caller " + caller + ": " + e.getCause());
          }
        }
      }
    } catch (Exception e) {
      throw new AssertionError("The race itself failed: " + e, e);
    } finally {
      callers.shutdownNow();
    }
    Assertions.assertThat(failures)
        .as(
            "createTableIfMissing calls that failed while %d callers created the same table at"
                + " once, in %d rounds",
            THREADS, rounds)
        .isEmpty();
    for (String table : tables) {
      Assertions.assertThat(
              schema
                  .dsl()
                  .fetchSingle("select to_regclass(?) is not null", table)
                  .get(0, Boolean.class))
          .as("the table %s exists after the race", table)
          .isTrue();
    }
  }

  /**
   * Fills {@code schema}'s pool with a connection per caller: a pool that opens them on demand
   * hands them out one after another, which staggers the callers past the barrier and hides the
   * race.
   */
  private static void warmUp(PostgresSchema schema) {
    List<Connection> held = new ArrayList<>();
    try {
      for (int caller = 0; caller < THREADS; caller++) {
        held.add(schema.dataSource().getConnection());
      }
    } catch (SQLException e) {
      throw new AssertionError("Could not open " + THREADS + " connections: " + e, e);
    } finally {
      for (Connection connection : held) {
        try {
          connection.close();
        } catch (SQLException e) {
          // Returned to the pool or not, the race runs; the pool replaces a broken connection.
        }
      }
    }
  }
}
