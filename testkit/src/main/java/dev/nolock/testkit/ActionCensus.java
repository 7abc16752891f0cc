package dev.nolock.testkit;

import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

/**
 * How often each action of a stateful property ran, over the whole property run (all tries, and the
 * shrinking runs after a failure), and the floor that makes a green run mean something: a property
 * whose fault actions hardly ran proved little, however green it is.
 *
 * <p>Guarantee: {@link #check()} fails unless every required action (a fault action that fired,
 * named by {@link #fault}) ran at least {@link #minimum()} times. The properties in this package
 * call it after the run (through a jqwik {@code AroundPropertyHook}) and print {@link #report()},
 * so a CI log shows the census of each run.
 *
 * <p>Tries: {@link #tries(int)} reads the system property {@value #TRIES_PROPERTY} ({@code
 * -Dnolock.property.tries=200} runs 200 action chains instead of the small default that keeps a
 * module's property run short). Thread-safe.
 */
public final class ActionCensus {

  /** The system property that sets how many action chains a property runs. */
  public static final String TRIES_PROPERTY = "nolock.property.tries";

  /** The default floor: each fault action must fire at least this often in one property run. */
  public static final int MIN_PER_FAULT_KIND = 4;

  private final int minimum;
  private final Set<String> required;
  private final Map<String, AtomicInteger> counts = new ConcurrentHashMap<>();

  /**
   * A census whose {@code required} actions must each run at least {@code minimum} times.
   *
   * @throws IllegalArgumentException when {@code minimum} is below 1 or nothing is required
   */
  public ActionCensus(int minimum, List<String> required) {
    if (minimum < 1) {
      throw new IllegalArgumentException(
          "A census minimum is at least 1, got " + minimum + ": pass e.g. MIN_PER_FAULT_KIND.");
    }
    if (Objects.requireNonNull(required, "required").isEmpty()) {
      throw new IllegalArgumentException(
          "A census needs at least one required action: name the fault actions, e.g."
              + " ActionCensus.fault(\"RELEASE\", FaultKind.ANSWER_LOST).");
    }
    this.minimum = minimum;
    this.required = new LinkedHashSet<>(required);
    this.required.forEach(name -> counts.put(name, new AtomicInteger()));
  }

  /** The name under which a fired fault of {@code kind} on {@code operation} is counted. */
  public static String fault(String operation, FaultKind kind) {
    return operation + " " + kind;
  }

  /**
   * The tries a property runs: the system property {@value #TRIES_PROPERTY} when set, else {@code
   * defaultTries}.
   *
   * @throws IllegalArgumentException when the system property is not a positive integer
   */
  public static int tries(int defaultTries) {
    String value = System.getProperty(TRIES_PROPERTY);
    if (value == null || value.isBlank()) {
      return defaultTries;
    }
    try {
      int tries = Integer.parseInt(value.trim());
      if (tries >= 1) {
        return tries;
      }
    } catch (NumberFormatException e) {
      // reported below
    }
    throw new IllegalArgumentException(
        "-D"
            + TRIES_PROPERTY
            + "="
            + value
            + " is not a positive integer: pass e.g. -D"
            + TRIES_PROPERTY
            + "=200.");
  }

  /** Counts one run of {@code action}. */
  public void ran(String action) {
    counts.computeIfAbsent(action, a -> new AtomicInteger()).incrementAndGet();
  }

  /** How often {@code action} ran so far. */
  public int count(String action) {
    AtomicInteger count = counts.get(action);
    return count == null ? 0 : count.get();
  }

  public int minimum() {
    return minimum;
  }

  /** Every action counted, by name, sorted. */
  public Map<String, Integer> counts() {
    return counts.entrySet().stream()
        .collect(
            Collectors.toMap(
                Map.Entry::getKey, e -> e.getValue().get(), (a, b) -> a, TreeMap::new));
  }

  /**
   * Fails when a required action ran fewer than {@link #minimum()} times.
   *
   * @throws AssertionError naming each such action, its count, and how to get more runs
   */
  public void check() {
    Map<String, Integer> shortfall = new TreeMap<>();
    for (String action : required) {
      int count = count(action);
      if (count < minimum) {
        shortfall.put(action, count);
      }
    }
    if (!shortfall.isEmpty()) {
      throw new AssertionError(
          "The census of this property run is below the floor of "
              + minimum
              + " per fault action: "
              + shortfall
              + ". Those faults were hardly exercised, so the run proves little about them. Run"
              + " more tries (-D"
              + TRIES_PROPERTY
              + "=N) or make the actions that arm them likelier. Census: "
              + counts());
    }
  }

  /** The census as lines of "action: count", required actions marked, for the CI log. */
  public String report() {
    StringBuilder out = new StringBuilder();
    counts()
        .forEach(
            (action, count) ->
                out.append(
                    String.format(
                        "  %-40s %6d%s%n",
                        action,
                        count,
                        required.contains(action) ? "  (required >= " + minimum + ")" : "")));
    return out.toString();
  }

  @Override
  public String toString() {
    return "ActionCensus" + counts();
  }
}
