package dev.nolock.testkit.internal;

import dev.nolock.patterns.Lease;
import dev.nolock.testkit.ChildChannel;
import dev.nolock.testkit.PausableHolder;
import dev.nolock.testkit.Protection;
import java.time.Duration;

/**
 * The paused holder's JVM. Arguments: holder class, lock name, TTL millis, max wait millis, value,
 * FENCED or UNFENCED. Speaks the {@link ChildChannel} protocol; events:
 *
 * <ol>
 *   <li>{@code ABOUT_TO_WRITE <token> <owner>}: acquired and past the point-of-no-return check;
 *   <li>then it waits at the gate. The scenario freezes it with SIGSTOP here, so the pause lands
 *       between the check and the write, and the frozen watchdog cannot renew;
 *   <li>on {@code GO} (sent with SIGCONT): {@code ATTEMPTING <token> <owner>}, then {@code
 *       ACCEPTED} or {@code REFUSED}, and exit 0. Any failure: {@code ERROR <message>}, exit 1.
 * </ol>
 */
public final class PausedHolderMain {

  private PausedHolderMain() {}

  public static void main(String[] args) throws Exception {
    ChildChannel channel = ChildChannel.open();
    try {
      Class<?> type = Class.forName(args[0]);
      String lockName = args[1];
      Duration ttl = Duration.ofMillis(Long.parseLong(args[2]));
      Duration maxWait = Duration.ofMillis(Long.parseLong(args[3]));
      String value = args[4];
      Protection protection = Protection.valueOf(args[5]);
      try (PausableHolder holder = (PausableHolder) type.getDeclaredConstructor().newInstance()) {
        Lease lease = holder.acquireAndCheck(lockName, ttl, maxWait);
        channel.report("ABOUT_TO_WRITE", lease.token().value(), lease.owner());
        channel.gate();
        channel.report("ATTEMPTING", lease.token().value(), lease.owner());
        channel.report(holder.write(lease, value, protection) ? "ACCEPTED" : "REFUSED");
      }
    } catch (Throwable e) {
      channel.fail(e, 1);
    }
    System.exit(0);
  }
}
