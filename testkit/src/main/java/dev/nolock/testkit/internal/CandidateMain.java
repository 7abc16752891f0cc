package dev.nolock.testkit.internal;

import dev.nolock.patterns.Lease;
import dev.nolock.testkit.ChildChannel;
import dev.nolock.testkit.ElectionCandidate;
import dev.nolock.testkit.Protection;
import java.time.Duration;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;

/**
 * One election candidate's JVM. Arguments: candidate class, election name, lease duration, renew
 * deadline and retry period in milliseconds, FENCED or UNFENCED. Speaks the {@link ChildChannel}
 * protocol, with one command of its own; events:
 *
 * <ul>
 *   <li>{@code READY} once it campaigns; {@code NEW_LEADER <identity>} when the leader it sees
 *       changes; {@code STOPPED_LEADING};
 *   <li>{@code ABOUT_TO_WRITE <token> <owner>}: elected and past the point-of-no-return check. The
 *       write waits for the command below, so that a SIGSTOP sent now lands between the check and
 *       the write (the wait only pins where the pause lands; the pause is the SIGSTOP);
 *   <li>on {@code WRITE <value>}: {@code ATTEMPTING <token> <owner>}, then {@code ACCEPTED} or
 *       {@code REFUSED}. The write runs on the main thread with the term it was handed, as a write
 *       already in flight when a GC pause struck would: stepping down cannot call it back;
 *   <li>on {@code STOP}: closes the candidate (stepping down gracefully) and exits 0.
 * </ul>
 *
 * Any failure prints {@code ERROR <message>} and exits 1.
 */
public final class CandidateMain {

  private CandidateMain() {}

  public static void main(String[] args) throws Exception {
    ChildChannel channel = ChildChannel.openWithOwnCommands();
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
                channel.report("ABOUT_TO_WRITE", term.token().value(), term.owner());
              }

              @Override
              public void newLeader(String identity) {
                channel.report("NEW_LEADER", identity);
              }

              @Override
              public void stoppedLeading() {
                channel.report("STOPPED_LEADING");
              }
            });
        channel.report("READY");
        for (String line; (line = channel.nextLine()) != null; ) {
          if (!line.startsWith("WRITE ")) {
            throw new IllegalArgumentException("expected WRITE <value> or STOP, got " + line);
          }
          Lease term = terms.poll();
          if (term == null) {
            throw new IllegalStateException("told to write before it was elected");
          }
          channel.report("ATTEMPTING", term.token().value(), term.owner());
          boolean accepted = candidate.write(term, line.substring("WRITE ".length()), protection);
          channel.report(accepted ? "ACCEPTED" : "REFUSED");
        }
      }
    } catch (Throwable e) {
      channel.fail(e, 1);
    }
    System.exit(0);
  }
}
