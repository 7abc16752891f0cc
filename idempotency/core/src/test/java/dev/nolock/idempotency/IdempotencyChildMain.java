package dev.nolock.idempotency;

import dev.nolock.idempotency.internal.Safeguards;
import dev.nolock.testkit.ChildChannel;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The process that crashes or is paused mid-attempt. Arguments: mode ({@code PHASES} or {@code
 * ACTION}), JDBC URL (with the test's schema), scope, key, lease in milliseconds, safeguards
 * ({@code ALL} or {@code NO_ATTEMPT_CHECK}). Speaks the {@link ChildChannel} protocol; events:
 *
 * <ul>
 *   <li>{@code PHASES}: runs {@link LedgerPhases}; in phase 2, after its ledger row was written and
 *       before the phase commits, reports {@code IN_PHASE_2 <token>} and waits at the gate, so a
 *       {@code kill -9} lands inside phase 2.
 *   <li>{@code ACTION}: one action that writes a ledger row {@code effect}, reports {@code
 *       IN_ACTION <token>} and waits at the gate (the test freezes it there with SIGSTOP); on
 *       {@code GO} it reports {@code STORING <token>} and returns, and the library's conditional
 *       completion runs. Then {@code OUTCOME <type> <token>} and {@code STALE_ATTEMPTS <count>}.
 * </ul>
 *
 * Any failure: {@code ERROR <message>}, exit 1.
 */
public final class IdempotencyChildMain {

  static final String SCOPE = "child";

  private IdempotencyChildMain() {}

  public static void main(String[] args) {
    ChildChannel channel = ChildChannel.open();
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
              IdempotencyConfig.custom().lease(lease).metrics(registry, "child").build(),
              ResultCodec.utf8(),
              FailurePolicy.releaseOnEveryFailure(),
              safeguards);
      Outcome<String> outcome;
      if (mode.equals("PHASES")) {
        Phases<String, RuntimeException> phases =
            LedgerPhases.of(
                attempt -> {},
                attempt -> {
                  channel.report("IN_PHASE_2", attempt.token().value());
                  gate(channel);
                });
        outcome =
            keys.execute(scope, Caller.anonymous(), key, Fingerprint.of("same-request"), phases);
      } else {
        outcome =
            keys.execute(
                scope,
                Caller.anonymous(),
                key,
                Fingerprint.of("same-request"),
                attempt -> {
                  Ledger.write(attempt, "effect");
                  channel.report("IN_ACTION", attempt.token().value());
                  gate(channel);
                  channel.report("STORING", attempt.token().value());
                  return "result of attempt " + attempt.token().value();
                });
      }
      String token =
          outcome instanceof Outcome.StaleAttempt<String> stale
              ? Long.toString(stale.attempt().value())
              : outcome instanceof Outcome.Completed<String> done
                  ? Long.toString(done.attempt().value())
                  : "-";
      channel.report("OUTCOME", outcome.getClass().getSimpleName(), token);
      channel.report(
          "STALE_ATTEMPTS",
          (long) registry.get("nolock.idempotency.stale.attempts").counter().count());
    } catch (Throwable e) {
      channel.fail(e, 1);
    }
    System.exit(0);
  }

  /** The gate inside an action, whose callbacks may not throw checked exceptions. */
  private static void gate(ChildChannel channel) {
    try {
      channel.gate();
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted at the gate", e);
    }
  }
}
