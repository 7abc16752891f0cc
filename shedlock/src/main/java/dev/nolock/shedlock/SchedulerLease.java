package dev.nolock.shedlock;

import dev.nolock.lock.HeldLock;
import dev.nolock.shedlock.internal.ThreadGrants;

/**
 * The nolock grant behind the ShedLock lock that the calling thread holds, so that a
 * {@code @SchedulerLock} method can fence its writes: ShedLock's {@code LockAssert} says a lock is
 * held; this says which grant, with its {@link dev.nolock.patterns.FencingToken}.
 *
 * <pre>{@code
 * @Scheduled(cron = "0 0 2 * * *")
 * @SchedulerLock(name = "nightly-report", lockAtMostFor = "PT3H")
 * void nightlyReport() {
 *   HeldLock held = SchedulerLease.current();
 *   held.checkPointOfNoReturn(Duration.ofSeconds(1));         // LeaseLostException past lockAtMostFor
 *   fence.write(dsl, held.lease(), tx -> writeReport(tx));     // refused once a newer run wrote
 * }
 * }</pre>
 *
 * <p>Guarantee: from the {@code lock} call that granted it until its {@code unlock} (or an
 * extension found it lost), a grant of a {@link NolockLockProvider} is the current one of the
 * thread that called {@code lock}, which is the thread ShedLock runs the locked method on. Locks of
 * different names nest; the innermost is current. The grant stays current after its lease ran out,
 * so that {@link HeldLock#checkPointOfNoReturn} says so and the fence refuses its writes.
 *
 * <p>Do not release or extend the returned {@link HeldLock} yourself: ShedLock unlocks it, and
 * {@code LockExtender.extendActiveLock} extends it.
 */
public final class SchedulerLease {

  private SchedulerLease() {}

  /**
   * The innermost grant this thread holds through a {@link NolockLockProvider}.
   *
   * @throws IllegalStateException when it holds none
   */
  public static HeldLock current() {
    return ThreadGrants.innermost()
        .getOrElseThrow(
            () ->
                new IllegalStateException(
                    "This thread holds no lock of a NolockLockProvider: call"
                        + " SchedulerLease.current() from a @SchedulerLock method (on the thread"
                        + " that runs it, not one it hands work to), with a NolockLockProvider as"
                        + " the application's LockProvider."));
  }

  /**
   * The grant of the lock named {@code lockName} that this thread holds through a {@link
   * NolockLockProvider}, for a method nested in several locks.
   *
   * @throws IllegalStateException when it holds none of that name
   */
  public static HeldLock current(String lockName) {
    if (lockName == null) {
      throw new IllegalArgumentException(
          "lockName is null: pass the name given to @SchedulerLock(name = ...).");
    }
    return ThreadGrants.named(lockName)
        .getOrElseThrow(
            () ->
                new IllegalStateException(
                    "This thread holds no lock named \""
                        + lockName
                        + "\" of a NolockLockProvider: call it from the method that"
                        + " @SchedulerLock(name = \""
                        + lockName
                        + "\") locks, on the thread that runs it."));
  }
}
