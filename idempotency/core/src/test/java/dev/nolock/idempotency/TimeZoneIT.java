package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Two instances whose database sessions run in different time zones share one keys table: A in
 * {@code America/New_York}, B in {@code UTC} (pgjdbc sets each session's TimeZone from its JVM, so
 * two hosts configured differently do this).
 *
 * <p>A claims a key with a 10-minute lease and is still running its action (a charge) when B gets
 * the same request. On the table {@code createTableIfMissing()} makes ({@code timestamptz}) B is
 * told the request is in progress: the lease is an instant, whatever the session's zone. The
 * negative control runs the same on a table whose {@code locked_until} and {@code expires_at} are
 * {@code timestamp} (without time zone), the shape {@code createTableIfMissing()} now refuses
 * ({@code SchemaIT}): A's session stores the lease's New York wall time, B's session reads it as a
 * UTC time 4 or 5 hours in the past, takes the key over and charges again.
 *
 * <p>The TimeZone is set by each pool's {@code connectionInitSql}: pgjdbc sends {@code TimeZone} as
 * a startup parameter of its own, which wins over {@code options=-c TimeZone=...} in the URL.
 */
@ExtendWith(PostgresExtension.class)
class TimeZoneIT {

  private static final Duration LEASE = Duration.ofMinutes(10);

  @Test
  void anInstanceInAnotherTimeZoneFindsTheKeyInProgressWithinTheLease(PostgresSchema pg)
      throws Exception {
    IdempotencyKeys.create(pg.dataSource(), config("tz_keys"), ResultCodec.utf8())
        .createTableIfMissing();

    Race race = race(pg, "tz_keys");

    assertThat(race.second).isInstanceOf(Outcome.RequestInProgress.class);
    assertThat(race.first).isInstanceOf(Outcome.Completed.class);
    assertThat(race.charges).as("the action ran once").isEqualTo(1);
  }

  /** Negative control: the same on a table with {@code timestamp} columns charges twice. */
  @Test
  void negativeControlWithTimestampsWithoutTimeZoneTheOtherInstanceChargesAgain(PostgresSchema pg)
      throws Exception {
    pg.dsl().execute("CREATE SEQUENCE local_keys_attempt_seq START WITH 1");
    pg.dsl()
        .execute(
            "CREATE TABLE local_keys (scope varchar(100) NOT NULL, principal text NOT NULL,"
                + " downstream_key uuid NOT NULL, idempotency_key varchar(255) NOT NULL,"
                + " fingerprint varchar(255) NOT NULL, state varchar(16) NOT NULL, attempt_token"
                + " bigint NOT NULL, attempt_count int NOT NULL, recovery_point varchar(63) NOT"
                + " NULL, locked_until timestamp NOT NULL, response_status int, response_body"
                + " bytea, created_at timestamp NOT NULL, completed_at timestamp, expires_at"
                + " timestamp NOT NULL, PRIMARY KEY (scope, principal, idempotency_key))");

    Race race = race(pg, "local_keys");

    assertThat(race.second)
        .as("B read A's lease as hours expired and took the key over")
        .isInstanceOf(Outcome.Completed.class);
    assertThat(race.first).isInstanceOf(Outcome.StaleAttempt.class);
    assertThat(race.charges).as("the action ran twice: a double charge").isEqualTo(2);
  }

  private record Race(Outcome<String> first, Outcome<String> second, int charges) {}

  /**
   * A (New York) runs the action and holds it until B (UTC) has answered the same request; returns
   * both outcomes and how often the action ran.
   */
  private static Race race(PostgresSchema pg, String table) throws Exception {
    try (HikariDataSource newYork = pool(pg, "America/New_York");
        HikariDataSource utc = pool(pg, "UTC")) {
      assertThat(DSL.using(newYork, SQLDialect.POSTGRES).fetchValue("SHOW TimeZone"))
          .isEqualTo("America/New_York");
      assertThat(DSL.using(utc, SQLDialect.POSTGRES).fetchValue("SHOW TimeZone")).isEqualTo("UTC");
      IdempotencyKeys<String> a =
          IdempotencyKeys.create(newYork, config(table), ResultCodec.utf8());
      IdempotencyKeys<String> b = IdempotencyKeys.create(utc, config(table), ResultCodec.utf8());
      String key = UUID.randomUUID().toString();
      Fingerprint request = Fingerprint.of("charge 100 EUR");
      AtomicInteger charges = new AtomicInteger();
      CountDownLatch aCharging = new CountDownLatch(1);
      CountDownLatch bAnswered = new CountDownLatch(1);

      CompletableFuture<Outcome<String>> first =
          CompletableFuture.supplyAsync(
              () ->
                  a.execute(
                      "payments",
                      Caller.anonymous(),
                      key,
                      request,
                      attempt -> {
                        charges.incrementAndGet();
                        aCharging.countDown();
                        await(bAnswered);
                        return "charged by A";
                      }));
      assertThat(aCharging.await(60, TimeUnit.SECONDS)).as("A is charging").isTrue();
      Outcome<String> second =
          b.execute(
              "payments",
              Caller.anonymous(),
              key,
              request,
              attempt -> {
                charges.incrementAndGet();
                return "charged by B";
              });
      bAnswered.countDown();
      return new Race(first.get(60, TimeUnit.SECONDS), second, charges.get());
    }
  }

  private static IdempotencyConfig config(String table) {
    return IdempotencyConfig.custom().table(table).lease(LEASE).build();
  }

  private static HikariDataSource pool(PostgresSchema pg, String timeZone) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(pg.jdbcUrl());
    config.setPoolName("tz-" + timeZone.replace('/', '-'));
    config.setMaximumPoolSize(3);
    config.setMinimumIdle(0);
    config.setConnectionInitSql("SET TIME ZONE '" + timeZone + "'");
    return new HikariDataSource(config);
  }

  private static void await(CountDownLatch latch) {
    try {
      if (!latch.await(60, TimeUnit.SECONDS)) {
        throw new IllegalStateException("B never answered");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException(e);
    }
  }
}
