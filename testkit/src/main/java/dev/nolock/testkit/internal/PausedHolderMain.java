package dev.nolock.testkit.internal;

import dev.nolock.patterns.Lease;
import dev.nolock.testkit.PausableHolder;
import dev.nolock.testkit.Protection;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

/**
 * The paused holder's JVM. Arguments: holder class, lock name, TTL millis, max wait millis, value,
 * FENCED or UNFENCED. Talks to the scenario one line per event on stdout:
 *
 * <ol>
 *   <li>{@code ABOUT_TO_WRITE <token> <owner>}: acquired and past the point-of-no-return check;
 *   <li>then it blocks reading stdin. The scenario freezes it with SIGSTOP here, so the pause lands
 *       between the check and the write, and the frozen watchdog cannot renew. The gate only pins
 *       where the pause lands; the pause itself is the SIGSTOP;
 *   <li>on the line {@code WRITE} (sent with SIGCONT): {@code ATTEMPTING <token> <owner>}, then
 *       {@code ACCEPTED} or {@code REFUSED}, and exit 0. Any failure: {@code ERROR <message>}, exit
 *       1.
 * </ol>
 */
public final class PausedHolderMain {

  private PausedHolderMain() {}

  public static void main(String[] args) throws Exception {
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    try {
      Class<?> type = Class.forName(args[0]);
      String lockName = args[1];
      Duration ttl = Duration.ofMillis(Long.parseLong(args[2]));
      Duration maxWait = Duration.ofMillis(Long.parseLong(args[3]));
      String value = args[4];
      Protection protection = Protection.valueOf(args[5]);
      try (PausableHolder holder = (PausableHolder) type.getDeclaredConstructor().newInstance()) {
        Lease lease = holder.acquireAndCheck(lockName, ttl, maxWait);
        out.println("ABOUT_TO_WRITE " + lease.token().value() + " " + lease.owner());
        BufferedReader in =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line = in.readLine();
        if (!"WRITE".equals(line)) {
          out.println("ERROR expected WRITE on stdin, got " + line);
          System.exit(1);
        }
        out.println("ATTEMPTING " + lease.token().value() + " " + lease.owner());
        out.println(holder.write(lease, value, protection) ? "ACCEPTED" : "REFUSED");
      }
    } catch (Throwable e) {
      out.println("ERROR " + e);
      e.printStackTrace();
      System.exit(1);
    }
    System.exit(0);
  }
}
