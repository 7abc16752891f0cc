package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.LostLease;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseLostException;
import dev.nolock.patterns.sql.Fence;
import dev.nolock.testkit.FenceAuditor;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.Protection;
import dev.nolock.testkit.TcpProxy;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.sql.Connection;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.SQLDialect;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The second of the three tests that prove a lock broken: network faults, injected by a TCP proxy
 * ({@link TcpProxy}) between holder A and PostgreSQL, which is both the lock service and the
 * protected resource here.
 *
 * <ol>
 *   <li>A's network freezes while its write is in flight, past its lease; B acquires and writes;
 *       the network heals and A's stale write arrives. With the fence it is refused (and shown to
 *       have arrived: the refusal comes from the database); without it, the auditor reports the
 *       lost update.
 *   <li>A's connection to the lock service is cut, so its renewals fail: A learns it lost the lease
 *       (callback, then {@link LeaseLostException}) before its next checked write.
 * </ol>
 */
@ExtendWith(PostgresExtension.class)
class NetworkFaultIT {

  private static final Duration TTL = Duration.ofSeconds(3);
  private static final Table<?> RESOURCE = table(name("fault_resource"));
  private static final Field<String> LOCK = field(name("lock_name"), String.class);
  private static final Field<String> VALUE = field(name("value"), String.class);

  private static PostgresSchema schema;
  private static ExecutorService writers;

  @BeforeAll
  static void tables(PostgresSchema s) {
    schema = s;
    PostgresLockBackend.create(s.dataSource()).createTableIfMissing();
    Fence.onTable(Fence.DEFAULT_TABLE).createTableIfMissing(s.dsl());
    s.dsl().execute("create table fault_resource (lock_name text primary key, value text)");
    writers = Executors.newCachedThreadPool();
  }

  @AfterAll
  static void stop() {
    writers.shutdownNow();
  }

  private record Outcome(
      boolean aStalledThroughTakeover,
      boolean aAccepted,
      String finalValue,
      FenceAuditor auditor,
      double fenceRejections) {}

  private Outcome frozenWriteArrivesAfterTakeover(String lock, Protection protection)
      throws Exception {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    Fence fence = Fence.onTable(Fence.DEFAULT_TABLE, registry, "faults");
    FenceAuditor auditor = new FenceAuditor();
    StringBuilder timeline = new StringBuilder();
    long start = System.nanoTime();
    Function<String, StringBuilder> log =
        e ->
            timeline.append(
                String.format("  t=%4.1fs  %s%n", (System.nanoTime() - start) / 1e9, e));
    try (TcpProxy proxy = TcpProxy.start(host(), port());
        FencedLock lockA = lockThrough(proxiedDataSource(proxy), new CompletableFuture<>());
        FencedLock lockB =
            FencedLock.create(
                PostgresLockBackend.create(schema.dataSource()),
                LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
        Connection aConnection = proxiedDataSource(proxy).getConnection()) {
      DSLContext aResource = DSL.using(aConnection, SQLDialect.POSTGRES);
      HeldLock a = lockA.tryAcquire(lock, TTL).get();
      a.checkPointOfNoReturn(Duration.ofMillis(50));
      Lease aLease = a.lease();
      log.apply("A acquired token " + aLease.token().value() + " and passed its check");

      proxy.freeze();
      auditor.attempted(lock, aLease.token(), aLease.owner());
      Future<Boolean> aWrite =
          writers.submit(() -> write(fence, aResource, aLease, "A", protection));
      log.apply("A's network froze with its write in flight");

      HeldLock b = lockB.acquire(lock, TTL, TTL.multipliedBy(4)).get();
      log.apply("B acquired token " + b.lease().token().value() + " after A's lease expired");
      auditor.attempted(lock, b.lease().token(), b.lease().owner());
      boolean bAccepted = write(fence, schema.dsl(), b.lease(), "B", protection);
      record(auditor, b.lease(), bAccepted);
      log.apply("B wrote: " + (bAccepted ? "accepted" : "refused"));
      boolean stalled = !aWrite.isDone();

      proxy.unfreeze();
      boolean aAccepted = aWrite.get(30, TimeUnit.SECONDS);
      record(auditor, aLease, aAccepted);
      log.apply(
          "the network healed; A's stale write arrived: "
              + (aAccepted ? "ACCEPTED (lost update)" : "refused by the fence"));
      String value = schema.dsl().select(VALUE).from(RESOURCE).where(LOCK.eq(lock)).fetchOne(VALUE);
      log.apply("the resource holds \"" + value + "\"");
      System.out.println("Network fault, " + protection + ":\n" + timeline);
      return new Outcome(
          stalled,
          aAccepted,
          value,
          auditor,
          registry.get("nolock.fence.rejections").counter().count());
    }
  }

  @Test
  void aWriteFrozenInFlightPastTheLeaseIsRefusedWhenItArrives() throws Exception {
    Outcome outcome = frozenWriteArrivesAfterTakeover("frozen-fenced", Protection.FENCED);

    assertThat(outcome.aStalledThroughTakeover()).as("A's write was in flight during B's").isTrue();
    assertThat(outcome.aAccepted()).isFalse();
    assertThat(outcome.fenceRejections()).as("it arrived and the database refused it").isEqualTo(1);
    assertThat(outcome.finalValue()).isEqualTo("B");
    outcome.auditor().assertNoStaleWriteAccepted();
  }

  @Test
  void negativeControlWithoutTheFenceTheArrivingWriteIsALostUpdate() throws Exception {
    Outcome outcome = frozenWriteArrivesAfterTakeover("frozen-unfenced", Protection.UNFENCED);

    assertThat(outcome.aStalledThroughTakeover()).isTrue();
    assertThat(outcome.aAccepted()).isTrue();
    assertThat(outcome.finalValue()).isEqualTo("A");
    assertThatThrownBy(() -> outcome.auditor().assertNoStaleWriteAccepted())
        .hasMessageContaining("Lost update");
  }

  @Test
  void aHolderCutOffFromTheLockServiceLearnsItLostTheLeaseBeforeItsNextWrite() throws Exception {
    CompletableFuture<LostLease> lost = new CompletableFuture<>();
    try (TcpProxy proxy = TcpProxy.start(host(), port());
        FencedLock lockA = lockThrough(proxiedDataSource(proxy), lost)) {
      HeldLock a = lockA.tryAcquire("cut", TTL).get();
      a.checkPointOfNoReturn(Duration.ofMillis(50));

      proxy.cut();

      LostLease lostLease = lost.get(TTL.multipliedBy(3).toMillis(), TimeUnit.MILLISECONDS);
      System.out.println("Cut from the lock service: lost " + lostLease);
      assertThat(lostLease.reason()).contains("ran out");
      assertThat(a.isLost()).isTrue();
      assertThatThrownBy(() -> a.checkPointOfNoReturn(Duration.ofMillis(50)))
          .isInstanceOf(LeaseLostException.class);
    }
  }

  private static FencedLock lockThrough(
      PGSimpleDataSource dataSource, CompletableFuture<LostLease> lost) {
    return FencedLock.create(
        PostgresLockBackend.create(dataSource),
        LockConfig.custom(LockPurpose.CORRECTNESS).onLeaseLost(lost::complete).build());
  }

  private static boolean write(
      Fence fence, DSLContext dsl, Lease lease, String value, Protection protection) {
    Function<DSLContext, Integer> upsert =
        tx ->
            tx.insertInto(RESOURCE, LOCK, VALUE)
                .values(lease.name(), value)
                .onConflict(LOCK)
                .doUpdate()
                .set(VALUE, value)
                .execute();
    if (protection == Protection.UNFENCED) {
      dsl.transaction(c -> upsert.apply(c.dsl()));
      return true;
    }
    return fence.write(dsl, lease, upsert::apply).isRight();
  }

  private static void record(FenceAuditor auditor, Lease lease, boolean accepted) {
    if (accepted) {
      auditor.accepted(lease.name(), lease.token(), lease.owner());
    } else {
      auditor.refused(lease.name(), lease.token(), lease.owner());
    }
  }

  private static PGSimpleDataSource proxiedDataSource(TcpProxy proxy) {
    PGSimpleDataSource dataSource = new PGSimpleDataSource();
    dataSource.setURL(schema.jdbcUrl().replace(host() + ":" + port(), "127.0.0.1:" + proxy.port()));
    return dataSource;
  }

  private static String host() {
    return url().group(1);
  }

  private static int port() {
    return Integer.parseInt(url().group(2));
  }

  private static Matcher url() {
    Matcher m = Pattern.compile("jdbc:postgresql://([^:/]+):(\\d+)/").matcher(schema.jdbcUrl());
    assertThat(m.find()).as("host and port in %s", schema.jdbcUrl()).isTrue();
    return m;
  }
}
