package dev.nolock.testkit;

/** A scenario's events with the seconds since it started, the way the seeds tell them. */
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
