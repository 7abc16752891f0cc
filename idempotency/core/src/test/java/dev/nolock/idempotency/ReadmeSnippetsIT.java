package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.patterns.FencingToken;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.ReadmeSnippet;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** The README's snippets, kept compiling and running; the HTTP one is in the http module. */
@ExtendWith(PostgresExtension.class)
class ReadmeSnippetsIT {

  private static final Path README = Path.of("../README.md");

  /** A payment provider with its own idempotency keys, like Stripe's. */
  interface PaymentProvider {
    /** Charges once per idempotency key; a repeat returns the first charge's id. */
    String charge(String idempotencyKey, long cents);
  }

  /** The provider declined the card: the same answer on every retry, so a final failure. */
  static final class CardDeclinedException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    CardDeclinedException(String reason) {
      super(reason);
    }

    String reason() {
      return getMessage();
    }
  }

  private static final class FakeProvider implements PaymentProvider {
    private final Map<String, String> charges = new ConcurrentHashMap<>();
    private final AtomicInteger calls = new AtomicInteger();

    @Override
    public String charge(String idempotencyKey, long cents) {
      calls.incrementAndGet();
      if (cents > 100_000) {
        throw new CardDeclinedException("amount over the card's limit");
      }
      return charges.computeIfAbsent(idempotencyKey, k -> "ch_" + charges.size());
    }
  }

  @Test
  void theReadmeSnippetsChargeOncePerKeyAndReplay(PostgresSchema schema) throws Exception {
    schema
        .dsl()
        .execute(
            "CREATE TABLE payments (id bigserial PRIMARY KEY, idem_key text NOT NULL,"
                + " cents bigint NOT NULL, charge text)");
    DataSource pool = schema.dataSource();
    MeterRegistry registry = new SimpleMeterRegistry();
    FakeProvider provider = new FakeProvider();
    String idempotencyKey = UUID.randomUUID().toString();
    String customerId = "customer-42";
    String requestBody = "{\"cents\":4200}";
    long cents = 4200;

    // --- README: Usage ---
    IdempotencyKeys<String> keys =
        IdempotencyKeys.create(
            pool, // a HikariCP DataSource
            IdempotencyConfig.custom()
                .lease(Duration.ofSeconds(30)) // longer than the slowest action
                .retention(Duration.ofHours(24))
                .metrics(registry, "payments")
                .build(),
            ResultCodec.utf8(),
            FailurePolicy.finalFor(CardDeclinedException.class, e -> "declined: " + e.reason()));
    keys.createTableIfMissing();

    Outcome<String> outcome =
        keys.execute(
            "payments.create", // the operation: a metrics tag, never per request
            Caller.of(customerId), // who sent it, from your authentication: keys are per caller
            idempotencyKey, // the client's Idempotency-Key
            Fingerprint.sha256("POST", "/payments", requestBody),
            attempt -> {
              // A foreign effect carries the key to the provider's own idempotency:
              String charge = provider.charge(attempt.idempotencyKeyForDownstream(), cents);
              // Local effects go through attempt.dsl(): they commit with the stored result,
              // or not at all.
              attempt
                  .dsl()
                  .insertInto(
                      table(name("payments")),
                      field(name("idem_key")),
                      field(name("cents")),
                      field(name("charge")))
                  .values(attempt.key(), cents, charge)
                  .execute();
              return "paid with " + charge;
            });

    if (outcome instanceof Outcome.Completed<String> done) {
      System.out.println("201 " + done.result()); // ran now
    } else if (outcome instanceof Outcome.Replayed<String> replay) {
      System.out.println("201 " + replay.result() + " (replayed)"); // ran before
    } else if (outcome instanceof Outcome.RequestInProgress<String> busy) {
      System.out.println("409, retry after " + busy.retryAfter());
    } else if (outcome instanceof Outcome.KeyReusedWithDifferentRequest<String>) {
      System.out.println("422: this key belongs to another request");
    } else if (outcome instanceof Outcome.StaleAttempt<String>) {
      System.out.println("409: a retry took over; ask again for its result");
    }
    // --- end ---

    assertThat(outcome).isEqualTo(new Outcome.Completed<>("paid with ch_0", outcomeToken(outcome)));
    assertThat(
            keys.execute(
                "payments.create",
                Caller.of(customerId),
                idempotencyKey,
                Fingerprint.sha256("POST", "/payments", requestBody),
                attempt -> "never runs"))
        .isEqualTo(new Outcome.Replayed<>("paid with ch_0"));
    assertThat(provider.calls).hasValue(1);

    // --- README: Atomic phases ---
    Phases<String, RuntimeException> transfer =
        Phases.builder()
            .phase(
                "payment_recorded",
                attempt ->
                    attempt
                        .dsl()
                        .insertInto(
                            table(name("payments")), field(name("idem_key")), field(name("cents")))
                        .values(attempt.key(), 500L)
                        .execute())
            .phase(
                "charged", // only the foreign call, and recording its answer
                attempt ->
                    attempt
                        .dsl()
                        .update(table(name("payments")))
                        .set(
                            field(name("charge")),
                            provider.charge(attempt.idempotencyKeyForDownstream(), 500))
                        .where(field(name("idem_key")).eq(attempt.key()))
                        .execute())
            .finish(
                attempt ->
                    "transfer done: "
                        + attempt
                            .dsl()
                            .select(field(name("charge")))
                            .from(table(name("payments")))
                            .where(field(name("idem_key")).eq(attempt.key()))
                            .fetchOne(0, String.class));

    Outcome<String> transferred =
        keys.execute(
            "transfers.create",
            Caller.of(customerId),
            UUID.randomUUID().toString(),
            Fingerprint.of("500"),
            transfer);
    // --- end ---
    assertThat(transferred).isInstanceOf(Outcome.Completed.class);
    assertThat(((Outcome.Completed<String>) transferred).result()).startsWith("transfer done: ch_");

    String reconciledKey = UUID.randomUUID().toString();

    // --- README: Operator calls ---
    // From a scheduler, e.g. hourly: deletes completed keys, and keys that committed nothing,
    // whose retention has passed.
    int purged = keys.purgeExpired();

    // The keys nobody came back for after a phase committed (the gauge
    // nolock_idempotency_abandoned_keys counts them), 100 per page:
    List<AbandonedKey> page = keys.abandonedKeys(100);
    while (!page.isEmpty()) {
      for (AbandonedKey abandoned : page) {
        System.out.println(
            abandoned.scope()
                + " "
                + abandoned.key()
                + " stopped after "
                + abandoned.recoveryPoint()
                + " ("
                + abandoned.attempts()
                + " attempts)");
      }
      page = page.size() < 100 ? List.of() : keys.abandonedKeys(page.get(page.size() - 1), 100);
    }

    // Once what its phases did is reconciled (the charge refunded or settled by hand):
    boolean forgotten = keys.forget("transfers.create", Caller.of(customerId), reconciledKey);
    // --- end ---
    assertThat(purged).isZero();
    assertThat(forgotten).as("no such key here").isFalse();
  }

  private static FencingToken outcomeToken(Outcome<String> outcome) {
    return ((Outcome.Completed<String>) outcome).attempt();
  }

  /** The README shows the code the test above runs (whitespace aside). */
  @Test
  void theReadmeShowsTheCodeTheTestRunsForUsage() {
    ReadmeSnippet.javaBlock(README, "## Usage").assertRunBy(ReadmeSnippetsIT.class, "Usage");
  }

  /** The README shows the code the test above runs, with a fresh key. */
  @Test
  void theReadmeShowsTheCodeTheTestRunsForAtomicPhases() {
    ReadmeSnippet.javaBlock(README, "### Atomic phases")
        .replacing(
            "keys.execute(\"transfers.create\", Caller.of(customerId), key,",
            "keys.execute(\"transfers.create\", Caller.of(customerId),"
                + " UUID.randomUUID().toString(),")
        .assertRunBy(ReadmeSnippetsIT.class, "Atomic phases");
  }

  /** The README shows the code the test above runs (whitespace aside). */
  @Test
  void theReadmeShowsTheCodeTheTestRunsForOperatorCalls() {
    ReadmeSnippet.javaBlock(README, "### Operator calls")
        .assertRunBy(ReadmeSnippetsIT.class, "Operator calls");
  }
}
