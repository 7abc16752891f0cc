package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** Keys expire after the retention and are purged in batches; live leases are never purged. */
@ExtendWith(PostgresExtension.class)
class RetentionIT {

  private static final String TABLE_NAME = "retention_keys";
  private static final Table<?> KEYS = table(name(TABLE_NAME));
  private static final Field<String> SCOPE = field(name("scope"), String.class);
  private static final Field<String> KEY = field(name("idempotency_key"), String.class);
  private static final Field<OffsetDateTime> EXPIRES_AT =
      field(name("expires_at"), OffsetDateTime.class);

  /** Moves a key's expiry into the past, as if the retention had passed. */
  private static void age(DSLContext dsl, String scope, String key) {
    dsl.update(KEYS)
        .set(EXPIRES_AT, field("clock_timestamp() - interval '1 minute'", OffsetDateTime.class))
        .where(SCOPE.eq(scope).and(KEY.eq(key)))
        .execute();
  }

  private static boolean stored(DSLContext dsl, String scope, String key) {
    return dsl.fetchExists(KEYS, SCOPE.eq(scope).and(KEY.eq(key)));
  }

  @Test
  void expiredKeysArePurgedInBatchesAndAPurgedKeyIsANewRequestWithAHigherToken(
      PostgresSchema schema) throws Exception {
    IdempotencyKeys<String> keys =
        IdempotencyKeys.create(
            schema.dataSource(),
            IdempotencyConfig.custom()
                .table(TABLE_NAME)
                .retention(Duration.ofHours(1))
                .purgeBatchSize(7)
                .build(),
            ResultCodec.utf8());
    keys.createTableIfMissing();
    keys.createTableIfMissing(); // idempotent
    DSLContext dsl = schema.dsl();
    List<String> old = new ArrayList<>();
    List<String> fresh = new ArrayList<>();
    long firstToken = 0;
    for (int i = 0; i < 25; i++) {
      String key = "key-" + i;
      Outcome<String> outcome =
          keys.execute("r", Caller.anonymous(), key, Fingerprint.of("f"), attempt -> "r");
      if (i == 0) {
        firstToken = ((Outcome.Completed<String>) outcome).attempt().value();
      }
      (i < 20 ? old : fresh).add(key);
    }
    old.forEach(key -> age(dsl, "r", key));
    // An abandoned-looking key whose retention passed but whose lease still runs.
    String live = UUID.randomUUID().toString();
    CountDownLatch inAction = new CountDownLatch(1);
    CountDownLatch finish = new CountDownLatch(1);
    CompletableFuture<Outcome<String>> running =
        CompletableFuture.supplyAsync(
            () ->
                keys.execute(
                    "r",
                    Caller.anonymous(),
                    live,
                    Fingerprint.of("f"),
                    attempt -> {
                      inAction.countDown();
                      IdempotencyKeysIT.await(finish);
                      return "live";
                    }));
    assertThat(inAction.await(30, TimeUnit.SECONDS)).isTrue();
    age(dsl, "r", live);

    int purged = keys.purgeExpired();
    finish.countDown();

    assertThat(purged).isEqualTo(20); // batches of 7, 7, 6
    assertThat(old).noneMatch(key -> stored(dsl, "r", key));
    assertThat(fresh).allMatch(key -> stored(dsl, "r", key));
    assertThat(running.get(30, TimeUnit.SECONDS)).isInstanceOf(Outcome.Completed.class);
    assertThat(keys.purgeExpired()).as("the live key completed with a new retention").isZero();

    Outcome<String> again =
        keys.execute("r", Caller.anonymous(), "key-0", Fingerprint.of("f"), attempt -> "again");
    assertThat(again).isInstanceOf(Outcome.Completed.class);
    assertThat(((Outcome.Completed<String>) again).attempt().value())
        .as("the sequence never reuses a token, so a stale attempt of the purged key cannot match")
        .isGreaterThan(firstToken);
  }
}
