package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.Fence;
import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.testkit.PausableHolder;
import dev.nolock.testkit.PauseScenario;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.Protection;
import io.vavr.control.Option;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Function;
import java.util.stream.Collectors;
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
 * Redlock under a pause: five independent Redis instances, a holder that acquires a majority,
 * passes its validity check and is frozen with SIGSTOP before its write until the validity time has
 * passed; a second client acquires a majority: two holders. Without a fence the auditor reports the
 * lost update; with the fence the stale write is refused. Redlock survives the loss of instances
 * (for an efficiency lock); it does not survive a pause, and it has no token of its own.
 */
@ExtendWith(PostgresExtension.class)
class RedlockPauseIT {

  private static final String PORTS = "nolock.redlock.ports";
  private static final String URL = "nolock.redlock.jdbcUrl";
  private static final Table<?> RESOURCE = table(name("redlock_resource"));
  private static final Field<String> LOCK = field(name("lock_name"), String.class);
  private static final Field<String> VALUE = field(name("value"), String.class);

  private static final List<PrivateRedisServer> instances = new ArrayList<>();
  private static String ports;
  private static String jdbcUrl;

  @BeforeAll
  static void start(PostgresSchema schema) throws IOException {
    for (int i = 0; i < 5; i++) {
      instances.add(PrivateRedisServer.start());
    }
    ports =
        instances.stream().map(s -> Integer.toString(s.port())).collect(Collectors.joining(","));
    jdbcUrl = schema.jdbcUrl();
    Fence.onTable(Fence.DEFAULT_TABLE).createTableIfMissing(schema.dsl());
    schema.dsl().execute("create table redlock_resource (lock_name text primary key, value text)");
  }

  @AfterAll
  static void stop() throws IOException {
    for (PrivateRedisServer s : instances) {
      s.close();
    }
  }

  /** A Redlock holder whose writes go to PostgreSQL, through the fence or around it. */
  public static final class Holder implements PausableHolder {
    private final Redlock redlock;
    private final DSLContext dsl;
    private final Fence fence = Fence.onTable(Fence.DEFAULT_TABLE);
    private final String owner =
        "redlock-" + ProcessHandle.current().pid() + "-" + UUID.randomUUID();

    public Holder() {
      this(System.getProperty(PORTS), System.getProperty(URL));
    }

    Holder(String ports, String url) {
      this.redlock = new Redlock(Arrays.stream(ports.split(",")).map(Integer::parseInt).toList());
      PGSimpleDataSource dataSource = new PGSimpleDataSource();
      dataSource.setURL(url);
      this.dsl = DSL.using(dataSource, SQLDialect.POSTGRES);
    }

    @Override
    public Lease acquireAndCheck(String lockName, Duration ttl, Duration maxWait) {
      long giveUp = System.nanoTime() + maxWait.toNanos();
      while (System.nanoTime() - giveUp < 0) {
        Option<Redlock.Grant> grant = redlock.tryLock(lockName, ttl);
        if (grant.isDefined()) {
          long validity = grant.get().validUntilNanos() - System.nanoTime();
          Deadline deadline =
              Deadline.forHolder(
                  LeaseClock.system(), System.nanoTime(), Duration.ofNanos(validity));
          deadline.checkPointOfNoReturn(Duration.ofMillis(100), Duration.ofMillis(50));
          return new Lease(lockName, owner, grant.get().token(), deadline);
        }
        // Retry after a short random delay, as Redlock prescribes; this is a backoff.
        LockSupport.parkNanos((long) (50_000_000 * Math.random()) + 10_000_000);
      }
      throw new IllegalStateException("no Redlock majority within " + maxWait);
    }

    @Override
    public boolean write(Lease lease, String value, Protection protection) {
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
      return fence.write(dsl, lease, upsert).isRight();
    }

    @Override
    public Optional<String> read(String lockName) {
      return dsl.select(VALUE).from(RESOURCE).where(LOCK.eq(lockName)).fetchOptional(VALUE);
    }

    @Override
    public void close() {
      redlock.close();
    }
  }

  private PauseScenario scenario() {
    return PauseScenario.builder(Holder.class)
        .childSystemProperty(PORTS, ports)
        .childSystemProperty(URL, jdbcUrl)
        .build();
  }

  @Test
  void aPausedRedlockHolderAndASecondMajorityHolderTheFenceRefusesTheStaleWrite() throws Exception {
    try (Holder newHolder = new Holder(ports, jdbcUrl)) {
      PauseScenario.Result result = scenario().run(newHolder, "redlock-fenced", Protection.FENCED);
      System.out.println("Redlock under a pause, fenced:\n" + result.timeline());

      assertThat(result.newHolderAccepted()).isTrue();
      assertThat(result.pausedWrites())
          .singleElement()
          .satisfies(
              w -> {
                assertThat(w.attempted()).isTrue();
                assertThat(w.accepted()).isFalse();
              });
      result.auditor().assertNoStaleWriteAccepted();
      assertThat(result.finalValue()).contains("new-holder");
    }
  }

  @Test
  void negativeControlWithoutAFenceRedlockLetsTheStaleWriteThrough() throws Exception {
    try (Holder newHolder = new Holder(ports, jdbcUrl)) {
      PauseScenario.Result result =
          scenario().run(newHolder, "redlock-unfenced", Protection.UNFENCED);
      System.out.println("Redlock under a pause, unfenced:\n" + result.timeline());

      assertThat(result.pausedWrites())
          .singleElement()
          .satisfies(w -> assertThat(w.accepted()).isTrue());
      assertThatThrownBy(() -> result.auditor().assertNoStaleWriteAccepted())
          .hasMessageContaining("Lost update");
    }
  }
}
