package dev.nolock.idempotency;

import dev.nolock.idempotency.internal.Safeguards;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The process that crashes or is paused mid-attempt. Arguments: mode ({@code PHASES} or {@code
 * ACTION}), JDBC URL (with the test's schema), scope, key, lease in milliseconds, safeguards
 * ({@code ALL} or {@code NO_ATTEMPT_CHECK}). One line per event on stdout:
 *
 * <ul>
 *   <li>{@code PHASES}: runs {@link LedgerPhases}; in phase 2, after its ledger row was written and
 *       before the phase commits, prints {@code IN_PHASE_2 <token>} and blocks reading stdin, so a
 *       {@code kill -9} lands inside phase 2.
 *   <li>{@code ACTION}: one action that writes a ledger row {@code effect}, prints {@code IN_ACTION
 *       <token>} and blocks reading stdin (the test freezes it there with SIGSTOP); on the line
 *       {@code GO} it prints {@code STORING <token>} and returns, and the library's conditional
 *       completion runs. Then {@code OUTCOME <type> <token>} and {@code STALE_ATTEMPTS <count>}.
 * </ul>
 *
 * Any failure: {@code ERROR <message>}, exit 1.
 */
public final class IdempotencyChildMain {

  static final String SCOPE = "child";

  private IdempotencyChildMain() {}

  public static void main(String[] args) {
    PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    try {
      String mode = args[0];
      PGSimpleDataSource dataSource = new PGSimpleDataSource();
      dataSource.setURL(args[1]);
      String scope = args[2];
      String key = args[3];
      Duration lease = Duration.ofMillis(Long.parseLong(args[4]));
      Safeguards safeguards =
          switch (args[5]) {
            case "ALL" -> Safeguards.ALL;
            case "NO_ATTEMPT_CHECK" -> new Safeguards(true, false);
            default -> throw new IllegalArgumentException("safeguards: " + args[5]);
          };
      SimpleMeterRegistry registry = new SimpleMeterRegistry();
      IdempotencyKeys<String> keys =
          IdempotencyKeys.withSafeguards(
              dataSource,
              IdempotencyConfig.custom().lease(lease).meterRegistry(registry).build(),
              ResultCodec.utf8(),
              FailurePolicy.releaseOnEveryFailure(),
              safeguards);
      BufferedReader in =
          new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
      Outcome<String> outcome;
      if (mode.equals("PHASES")) {
        Phases<String> phases =
            LedgerPhases.of(
                attempt -> {},
                attempt -> {
                  out.println("IN_PHASE_2 " + attempt.token().value());
                  gate(in, out);
                });
        outcome = keys.execute(scope, key, Fingerprint.of("same-request"), phases);
      } else {
        outcome =
            keys.execute(
                scope,
                key,
                Fingerprint.of("same-request"),
                attempt -> {
                  Ledger.write(attempt, "effect");
                  out.println("IN_ACTION " + attempt.token().value());
                  gate(in, out);
                  out.println("STORING " + attempt.token().value());
                  return "result of attempt " + attempt.token().value();
                });
      }
      String token =
          outcome instanceof Outcome.StaleAttempt<String> stale
              ? Long.toString(stale.attempt().value())
              : outcome instanceof Outcome.Completed<String> done
                  ? Long.toString(done.attempt().value())
                  : "-";
      out.println("OUTCOME " + outcome.getClass().getSimpleName() + " " + token);
      out.println(
          "STALE_ATTEMPTS "
              + (long) registry.get("nolock.idempotency.stale.attempts").counter().count());
    } catch (Throwable e) {
      out.println("ERROR " + e);
      e.printStackTrace();
      System.exit(1);
    }
    System.exit(0);
  }

  private static void gate(BufferedReader in, PrintStream out) {
    try {
      String line = in.readLine();
      if (!"GO".equals(line)) {
        throw new IllegalStateException("expected GO on stdin, got " + line);
      }
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }
}
