package dev.nolock.testkit;

import dev.nolock.patterns.Lease;
import io.vavr.control.Option;
import java.time.Duration;

/**
 * A lock holder as the {@link PauseScenario} drives it: acquire and pass the point-of-no-return
 * check, then write the protected resource. Implemented once per lock under test (a backend plus
 * the resource its holders write); users implement it for their own locks.
 *
 * <p>The scenario runs one instance in each paused child JVM, created through a public no-argument
 * constructor that reads its settings from system properties (see {@link
 * PauseScenario.Builder#childSystemProperty}), and one in the test JVM for the holder that takes
 * over.
 */
public interface PausableHolder extends AutoCloseable {

  /**
   * Acquires {@code lockName}, waiting up to {@code maxWait}, and passes the holder's
   * point-of-no-return check, so that the next step is the write itself.
   *
   * @throws IllegalStateException when the lock was not acquired within {@code maxWait}
   */
  Lease acquireAndCheck(String lockName, Duration ttl, Duration maxWait);

  /**
   * Writes {@code value} to the resource the lock protects, through the fence or around it.
   *
   * @return true when the resource accepted the write
   */
  boolean write(Lease lease, String value, Protection protection);

  /** The resource's current value for {@code lockName}, read directly. */
  Option<String> read(String lockName);

  @Override
  void close();
}
