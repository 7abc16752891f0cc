package dev.nolock.schedule;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.TcpProxy;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.ZoneOffset;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * A database outage longer than the lease during a long job: instance A reaches PostgreSQL through
 * a testkit {@link TcpProxy} that is cut for at least 1.5 leases (measured on the database's clock
 * from A's last renewal) while A's job waits on a latch; instance B reaches PostgreSQL directly.
 * When nobody took the run over meanwhile, A's renewal succeeds after the outage and no attempt 2
 * starts; when B took it over, A's renewal is refused and A's finish is stale. Each test takes a
 * few seconds (a 2 s lease).
 */
@ExtendWith(PostgresExtension.class)
class LeaseAfterOutageIT {

  private static final CronSchedule EVERY_MINUTE = CronSchedule.unix("* * * * *");
  private static final Duration LEASE = Duration.ofSeconds(2);
  private static final Duration WAIT = Duration.ofSeconds(30);

  private record Start(String instance, long attempt) {}

  private PostgresSchema schema;
  private Runs runs;
  private TcpProxy proxy;
  private MutableClock clock;
  private Instant minute;
  private final List<Start> starts = new CopyOnWriteArrayList<>();
  private final ExecutorService passes = Executors.newCachedThreadPool();

  @BeforeAll
  static void createRunsTable(PostgresSchema s) {
    ScheduledSingleton.plain(
            s.dataSource(), ScheduleConfig.custom("setup", EVERY_MINUTE).build(), r -> {})
        .createTableIfMissing();
  }

  @BeforeEach
  void startProxyAndClock(PostgresSchema s) {
    schema = s;
    runs = new Runs(s.dsl());
    Matcher url = Pattern.compile("jdbc:postgresql://([^:/]+):(\\d+)/").matcher(s.jdbcUrl());
    assertThat(url.find()).as("host and port in %s", s.jdbcUrl()).isTrue();
    proxy = TcpProxy.start(url.group(1), Integer.parseInt(url.group(2)));
    // The instances' wall clock agrees with the database's: the run is the latest minute on it.
    Instant dbNow =
        s.dsl()
            .resultQuery("SELECT clock_timestamp()")
            .fetchOne(0, OffsetDateTime.class)
            .toInstant();
    minute = EVERY_MINUTE.latestAtOrBefore(dbNow).get();
    clock = new MutableClock(minute.minusSeconds(1));
  }

  @AfterEach
  void stopProxy() {
    passes.shutdownNow();
    proxy.close();
  }

  @Test
  void aRunNobodyTookOverKeepsItsAttemptAfterAnOutageLongerThanTheLease() throws Exception {
    String job = "outage-kept";
    CountDownLatch aStarted = new CountDownLatch(1);
    CountDownLatch aRelease = new CountDownLatch(1);
    SimpleMeterRegistry aMetrics = new SimpleMeterRegistry();
    try (ScheduledSingleton a =
            ScheduledSingleton.plain(
                throughProxy(),
                config(job).metrics(aMetrics, "a").build(),
                blocking("a", aStarted, aRelease));
        ScheduledSingleton b =
            ScheduledSingleton.plain(
                schema.dataSource(), config(job).build(), run -> starts.add(start("b", run)))) {
      clock.set(minute.plusMillis(100));
      CompletableFuture<List<RunOutcome>> aPass =
          CompletableFuture.supplyAsync(a::runDueNow, passes);
      assertThat(aStarted.await(WAIT.toSeconds(), TimeUnit.SECONDS)).as("A's job started").isTrue();

      outageLongerThanTheLease(job);
      double renewalsBefore = count(aMetrics, "nolock.renewals");
      await("A renews (or gives up) its lease after the outage")
          .atMost(WAIT)
          .until(
              () ->
                  count(aMetrics, "nolock.renewals") > renewalsBefore
                      || count(aMetrics, "nolock.lease.losses") > 0);

      List<RunOutcome> bOutcomes = b.runDueNow();
      assertThat(starts)
          .as(
              "after an outage of 1.5 leases in which nobody took the run over, A's attempt 1 is"
                  + " still the run's (its renewal after the outage must succeed), so a later scan"
                  + " of B starts no attempt 2 while attempt 1 still runs (B's pass: %s)",
              bOutcomes)
          .containsExactly(new Start("a", 1));
      assertThat(count(aMetrics, "nolock.lease.losses")).as("A lost its lease").isZero();

      aRelease.countDown();
      List<RunOutcome> aOutcomes = aPass.get(WAIT.toSeconds(), TimeUnit.SECONDS);
      assertThat(aOutcomes).singleElement().isInstanceOf(RunOutcome.Finished.class);
      assertThat(((RunOutcome.Finished) aOutcomes.get(0)).run().attempt().value()).isEqualTo(1);
      assertThat(runs.at(job, minute))
          .hasValueSatisfying(
              row -> {
                assertThat(row.state()).isEqualTo("done");
                assertThat(row.attempt()).isEqualTo(1);
                assertThat(row.owner()).isEqualTo(a.identity());
              });
    } finally {
      aRelease.countDown();
    }
  }

  @Test
  void aRunTakenOverDuringTheOutageRefusesTheOldAttemptsRenewalAndFinish() throws Exception {
    TakenOver seen = takenOverDuringTheOutage("outage-taken", true);

    assertThat(seen.renewed())
        .as(
            "A's renewal of attempt 1 after the outage must be refused once B holds attempt 2 (A"
                + " renewed: %s, A told its lease was lost: %s)",
            seen.renewed(), seen.lost())
        .isFalse();
    assertThat(seen.lost()).as("A learnt it lost the run").isTrue();
    assertThat(seen.aOutcomes()).singleElement().isInstanceOf(RunOutcome.StaleAttempt.class);
    assertThat(seen.bOutcomes()).singleElement().isInstanceOf(RunOutcome.Finished.class);
    assertThat(starts).containsExactly(new Start("a", 1), new Start("b", 2));
    assertThat(runs.at("outage-taken", minute))
        .hasValueSatisfying(
            row -> {
              assertThat(row.state()).isEqualTo("done");
              assertThat(row.attempt()).isEqualTo(2);
            });
  }

  @Test
  void negativeControlWithoutTheAttemptCheckTheOldAttemptRenewsTheTakenOverRun() throws Exception {
    TakenOver seen = takenOverDuringTheOutage("outage-taken-control", false);

    assertThat(seen.renewed())
        .as("without the compare-and-swap on the attempt, A renews B's attempt 2 as its own")
        .isTrue();
    assertThat(seen.lost()).isFalse();
  }

  /** What A saw after the outage in which B took its run over. */
  private record TakenOver(
      boolean renewed, boolean lost, List<RunOutcome> aOutcomes, List<RunOutcome> bOutcomes) {}

  /**
   * A runs the minute through the proxy; the proxy is cut until A's lease has expired on the
   * database's clock; B (connected directly) takes the run over and its job waits; the proxy is
   * restored and A's first renewal after it is observed (succeeded, or refused and reported as a
   * lost lease) while B still holds attempt 2; then both jobs are released.
   */
  private TakenOver takenOverDuringTheOutage(String job, boolean renewalCheck) throws Exception {
    CountDownLatch aStarted = new CountDownLatch(1);
    CountDownLatch aRelease = new CountDownLatch(1);
    CountDownLatch bStarted = new CountDownLatch(1);
    CountDownLatch bRelease = new CountDownLatch(1);
    SimpleMeterRegistry aMetrics = new SimpleMeterRegistry();
    ScheduleConfig.Builder aConfig = config(job).metrics(aMetrics, "a");
    if (!renewalCheck) {
      aConfig.withoutRenewalAttemptCheckForNegativeControl();
    }
    try (ScheduledSingleton a =
            ScheduledSingleton.plain(
                throughProxy(), aConfig.build(), blocking("a", aStarted, aRelease));
        ScheduledSingleton b =
            ScheduledSingleton.plain(
                schema.dataSource(), config(job).build(), blocking("b", bStarted, bRelease))) {
      clock.set(minute.plusMillis(100));
      CompletableFuture<List<RunOutcome>> aPass =
          CompletableFuture.supplyAsync(a::runDueNow, passes);
      assertThat(aStarted.await(WAIT.toSeconds(), TimeUnit.SECONDS)).as("A's job started").isTrue();

      proxy.cut();
      await("A's lease expired on the database's clock")
          .atMost(WAIT)
          .until(() -> expiredFor(job, Duration.ZERO));
      CompletableFuture<List<RunOutcome>> bPass =
          CompletableFuture.supplyAsync(b::runDueNow, passes);
      assertThat(bStarted.await(WAIT.toSeconds(), TimeUnit.SECONDS))
          .as("B took the run over during the outage")
          .isTrue();
      double renewalsBefore = count(aMetrics, "nolock.renewals");
      proxy.restore();

      await("A renews, or is told it lost its lease, after the outage")
          .atMost(WAIT)
          .until(
              () ->
                  count(aMetrics, "nolock.renewals") > renewalsBefore
                      || count(aMetrics, "nolock.lease.losses") > 0);
      boolean renewed = count(aMetrics, "nolock.renewals") > renewalsBefore;
      boolean lost = count(aMetrics, "nolock.lease.losses") > 0;
      assertThat(runs.at(job, minute))
          .as("B still holds the run")
          .hasValueSatisfying(
              row -> {
                assertThat(row.state()).isEqualTo("running");
                assertThat(row.attempt()).isEqualTo(2);
                assertThat(row.owner()).isEqualTo(b.identity());
              });

      aRelease.countDown();
      List<RunOutcome> aOutcomes = aPass.get(WAIT.toSeconds(), TimeUnit.SECONDS);
      bRelease.countDown();
      List<RunOutcome> bOutcomes = bPass.get(WAIT.toSeconds(), TimeUnit.SECONDS);
      return new TakenOver(renewed, lost, aOutcomes, bOutcomes);
    } finally {
      aRelease.countDown();
      bRelease.countDown();
    }
  }

  /**
   * Cuts A off until its lease has been expired for half a lease on the database's clock, so the
   * outage lasted at least 1.5 leases from A's last renewal, then lets A reconnect.
   */
  private void outageLongerThanTheLease(String job) {
    proxy.cut();
    await("the outage outlasted A's lease by half a lease")
        .atMost(WAIT)
        .until(() -> expiredFor(job, LEASE.dividedBy(2)));
    proxy.restore();
  }

  /** True when the run's lease ended more than {@code ago} before the database's clock. */
  private boolean expiredFor(String job, Duration ago) {
    return schema
        .dsl()
        .resultQuery(
            "SELECT locked_until < clock_timestamp() - ? * interval '1 millisecond' FROM "
                + ScheduleConfig.DEFAULT_TABLE
                + " WHERE job = ? AND scheduled_at = CAST(? AS timestamptz)",
            ago.toMillis(),
            job,
            OffsetDateTime.ofInstant(minute, ZoneOffset.UTC))
        .fetchOne(0, Boolean.class);
  }

  private ScheduleConfig.Builder config(String job) {
    return ScheduleConfig.custom(job, EVERY_MINUTE).clock(clock).lease(LEASE);
  }

  private PlainJob blocking(String instance, CountDownLatch started, CountDownLatch release) {
    return run -> {
      starts.add(start(instance, run));
      started.countDown();
      assertThat(release.await(WAIT.toSeconds(), TimeUnit.SECONDS))
          .as("the test released the job")
          .isTrue();
    };
  }

  private static Start start(String instance, ScheduledRun run) {
    return new Start(instance, run.attempt().value());
  }

  /** A's connections: each opened anew through the proxy, so a cut refuses them all. */
  private PGSimpleDataSource throughProxy() {
    PGSimpleDataSource dataSource = new PGSimpleDataSource();
    dataSource.setURL(
        schema.jdbcUrl().replaceFirst("//[^:/]+:\\d+/", "//127.0.0.1:" + proxy.port() + "/"));
    dataSource.setConnectTimeout(2);
    return dataSource;
  }

  private static double count(SimpleMeterRegistry registry, String name) {
    return registry.get(name).counter().count();
  }
}
