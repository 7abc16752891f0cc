package dev.nolock.testkit.internal;

import dev.nolock.patterns.Lease;
import dev.nolock.testkit.ElectionCandidate;
import dev.nolock.testkit.Protection;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * One election candidate's JVM. Arguments: candidate class, election name, lease duration, renew
 * deadline and retry period in milliseconds, FENCED or UNFENCED. One line per event on stdout:
 *
 * <ul>
 *   <li>{@code READY} once it campaigns; {@code NEW_LEADER <identity>} when the leader it sees
 *       changes; {@code STOPPED_LEADING};
 *   <li>{@code ABOUT_TO_WRITE <token> <owner>}: elected and past the point-of-no-return check. The
 *       write waits for a line on stdin, so that a SIGSTOP sent now lands between the check and the
 *       write (the gate only pins where the pause lands; the pause is the SIGSTOP);
 *   <li>on {@code WRITE <value>}: {@code ATTEMPTING <token> <owner>}, then {@code ACCEPTED} or
 *       {@code REFUSED}. The write runs on the main thread with the term it was handed, as a write
 *       already in flight when a GC pause struck would: stepping down cannot call it back;
 *   <li>on {@code EXIT}: closes the candidate (stepping down gracefully) and exits 0.
 * </ul>
 *
 * Any failure prints {@code ERROR <message>} and exits 1.
 */
public final class CandidateMain {

  private CandidateMain() {}

  public static void main(String[] args) throws Exception {
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    try {
      Class<?> type = Class.forName(args[0]);
      String election = args[1];
      Duration leaseDuration = Duration.ofMillis(Long.parseLong(args[2]));
      Duration renewDeadline = Duration.ofMillis(Long.parseLong(args[3]));
      Duration retryPeriod = Duration.ofMillis(Long.parseLong(args[4]));
      Protection protection = Protection.valueOf(args[5]);
      BlockingQueue<Lease> terms = new LinkedBlockingQueue<>();
      try (ElectionCandidate candidate =
          (ElectionCandidate) type.getDeclaredConstructor().newInstance()) {
        candidate.campaign(
            election,
            leaseDuration,
            renewDeadline,
            retryPeriod,
            new ElectionCandidate.Events() {
              @Override
              public void elected(Lease term) {
                terms.add(term);
                out.println("ABOUT_TO_WRITE " + term.token().value() + " " + term.owner());
              }

              @Override
              public void newLeader(String identity) {
                out.println("NEW_LEADER " + identity);
              }

              @Override
              public void stoppedLeading() {
                out.println("STOPPED_LEADING");
              }
            });
        out.println("READY");
        BufferedReader in =
            new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        for (String line; (line = in.readLine()) != null && !line.equals("EXIT"); ) {
          if (!line.startsWith("WRITE ")) {
            out.println("ERROR expected WRITE <value> or EXIT on stdin, got " + line);
            System.exit(1);
          }
          Lease term = terms.poll();
          if (term == null) {
            out.println("ERROR told to write before it was elected");
            System.exit(1);
          }
          out.println("ATTEMPTING " + term.token().value() + " " + term.owner());
          boolean accepted = candidate.write(term, line.substring("WRITE ".length()), protection);
          out.println(accepted ? "ACCEPTED" : "REFUSED");
        }
      }
    } catch (Throwable e) {
      out.println("ERROR " + e);
      e.printStackTrace();
      System.exit(1);
    }
    System.exit(0);
  }
}
