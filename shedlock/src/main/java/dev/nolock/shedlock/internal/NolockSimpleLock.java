package dev.nolock.shedlock.internal;

import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.ReleaseOutcome;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.LeaseLostException;
import java.time.Duration;
import java.util.Optional;
import net.javacrumbs.shedlock.core.AbstractSimpleLock;
import net.javacrumbs.shedlock.core.LockConfiguration;
import net.javacrumbs.shedlock.core.SimpleLock;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One ShedLock lock over a nolock grant: the acquisition's, or an extension's (the same grant and
 * token under a new configuration). {@link AbstractSimpleLock} makes it single-use: after an unlock
 * or an extension, it refuses both with an {@link IllegalStateException}, as ShedLock's contract
 * says.
 */
public final class NolockSimpleLock extends AbstractSimpleLock {

  private static final Logger LOG = LoggerFactory.getLogger(NolockSimpleLock.class);

  private final Grant grant;
  private final long startNanos;
  private final LeaseClock clock;

  private NolockSimpleLock(
      LockConfiguration configuration, Grant grant, long startNanos, LeaseClock clock) {
    super(configuration);
    this.grant = grant;
    this.startNanos = startNanos;
    this.clock = clock;
  }

  /**
   * The lock for a fresh grant, bound to the calling thread until unlocked.
   *
   * @param askedNanos the clock reading from just before the grant was asked for
   */
  public static SimpleLock acquired(
      LockConfiguration configuration, HeldLock held, long askedNanos, LockConfig config) {
    Grant grant = new Grant(held, askedNanos);
    ThreadGrants.bind(grant);
    return new NolockSimpleLock(configuration, grant, askedNanos, config.clock());
  }

  /**
   * Keeps the lease until lockAtLeastFor after this configuration's start, counted from before the
   * grant was asked for (so never shorter than asked), or frees it when that has passed.
   */
  @Override
  protected void doUnlock() {
    try {
      Duration atLeast =
          Duration.ofNanos(startNanos - grant.askedNanos())
              .plus(lockConfiguration.getLockAtLeastFor());
      // Only a lock extended for more than a week in all can get here; a week is all a lease can
      // be asked to last.
      if (atLeast.compareTo(LockConfig.MAX_TTL) > 0) {
        atLeast = LockConfig.MAX_TTL;
      }
      ReleaseOutcome outcome = grant.held().releaseNoEarlierThan(atLeast);
      LOG.debug("Unlocked {}: {}", grant.held(), outcome);
    } finally {
      ThreadGrants.unbind(grant);
    }
  }

  /**
   * Sets the lease to end the new lockAtMostFor from now; empty when the backend refused (the lease
   * ran out or another holder has it). A backend failure is thrown and leaves this lock valid, so
   * that its holder can still unlock it.
   */
  @Override
  protected Optional<SimpleLock> doExtend(LockConfiguration extended) {
    Duration atMost = extended.getLockAtMostFor();
    if (atMost.isZero() || atMost.compareTo(LockConfig.MAX_TTL) > 0) {
      throw new IllegalArgumentException(
          "lockAtMostFor of the extension of lock \""
              + ShedLockNames.printable(extended.getName())
              + "\" is "
              + atMost
              + ": it must be longer than zero and at most "
              + LockConfig.MAX_TTL
              + ".");
    }
    long start = clock.nanoTime();
    try {
      grant.held().extend(atMost);
    } catch (LeaseLostException | IllegalStateException lost) {
      // Lost to its TTL or another holder, or released by the provider's close(): ShedLock's
      // answer for a lock that cannot be extended is empty.
      LOG.debug("Could not extend {}: {}", grant.held(), lost.getMessage());
      ThreadGrants.unbind(grant);
      return Optional.empty();
    }
    return Optional.of(new NolockSimpleLock(extended, grant, start, clock));
  }
}
