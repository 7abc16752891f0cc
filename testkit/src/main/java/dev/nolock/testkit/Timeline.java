package dev.nolock.testkit;

/**
 * A scenario's events, each with the seconds since the scenario started, so that a failure report
 * reads as a timeline ({@code t= 0.4s ...}).
 */
final class Timeline {
  private final long start = System.nanoTime();
  private final StringBuilder text = new StringBuilder();

  void add(String event) {
    double seconds = (System.nanoTime() - start) / 1e9;
    text.append(String.format("  t=%5.1fs  %s%n", seconds, event));
  }

  @Override
  public String toString() {
    return text.toString();
  }
}
