package dev.nolock.testkit;

import dev.nolock.patterns.Lease;
import io.vavr.control.Option;
import java.time.Duration;

/**
 * One candidate of a leader election as the {@link ElectionScenario} drives it: it campaigns, and
 * when elected it passes its point-of-no-return check and hands its term over, so that the next
 * step is the write. Implemented once per elector and backend; users implement it for their own
 * electors.
 *
 * <p>The scenario runs each candidate in a child JVM, created through a public no-argument
 * constructor that reads its settings from system properties (see {@link
 * ElectionScenario.Builder#childSystemProperty}), and one in the test JVM to read the resource.
 */
public interface ElectionCandidate extends AutoCloseable {

  /** What a candidate reports, from its elector's threads. */
  interface Events {

    /** Elected, and past the point-of-no-return check: {@code term} carries the fencing token. */
    void elected(Lease term);

    /** The leader this candidate sees changed to {@code identity} (its own when it won). */
    void newLeader(String identity);

    /** Leadership ended. */
    void stoppedLeading();
  }

  /**
   * Starts campaigning for {@code election} with the elector's three durations and returns at once.
   * The candidate must not halt its JVM when it loses leadership: the scenario needs the resumed
   * old leader's write to go out, to show the fence refusing it.
   */
  void campaign(
      String election,
      Duration leaseDuration,
      Duration renewDeadline,
      Duration retryPeriod,
      Events events);

  /**
   * Writes {@code value} to the resource the leader protects, through the fence or around it.
   *
   * @return true when the resource accepted the write
   */
  boolean write(Lease term, String value, Protection protection);

  /** The resource's current value for {@code election}, read directly. */
  Option<String> read(String election);

  /** Stops campaigning, stepping down (and releasing) if leading. */
  @Override
  void close();
}
