package dev.nolock.cas;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.catchThrowable;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.JdbcFaults;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import java.lang.reflect.InvocationHandler;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Proxy;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import java.util.function.Consumer;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * An {@code update} that keeps losing takes its turn on the row ({@link
 * VersionColumnStoreConfig.Builder#takeTurnAfter}): it writes where the lock-free retries give up,
 * a turn that sits idle is ended with nothing written and frees the row, and a turn's lost answers
 * are reported as what they are.
 */
@ExtendWith(PostgresExtension.class)
class TakeTurnIT {

  private static final int ATTEMPTS = 30;

  private final PostgresSchema schema;
  private final DSLContext dsl;
  private final ExecutorService rivals = Executors.newCachedThreadPool();

  TakeTurnIT(PostgresSchema schema) {
    this.schema = schema;
    this.dsl = schema.dsl();
  }

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    schema.dsl().execute(Tables.COUNTERS_DDL);
  }

  @AfterEach
  void stopRivals() {
    rivals.shutdownNow();
  }

  private static String newId() {
    return "turn-" + UUID.randomUUID();
  }

  private static VersionColumnStoreConfig.Builder<String, Long> config() {
    return VersionColumnStoreConfig.custom("counters", String.class, ValueCodec.longs())
        // every attempt is made: no give-up by time before the last one
        .retryPolicy(
            RetryPolicy.custom().maxAttempts(ATTEMPTS).maxElapsed(Duration.ofMinutes(10)).build())
        // the backoff advances this clock instead of sleeping: 20 ms of losing is a few attempts
        .clock(new ManualLeaseClock());
  }

  /** A store whose every update takes its turn at once. */
  private static VersionColumnStore<String, Long> everyUpdateATurn(DataSource dataSource) {
    return VersionColumnStore.create(dataSource, config().takeTurnAfter(Duration.ZERO).build());
  }

  /**
   * A writer that loses every race it runs: each time its change is applied, another connection
   * bumps the row's version before the change returns, so the compare-and-set that follows finds
   * the row moved on. In a turn the bump cannot land (the row is locked): it waits, and the change
   * returns once PostgreSQL shows it waiting for the lock.
   */
  private final class Rival implements AutoCloseable {
    private final Connection connection;
    private final int pid;
    private final String id;
    final AtomicInteger bumps = new AtomicInteger();
    final AtomicInteger bumpsThatWaited = new AtomicInteger();

    Rival(DataSource dataSource, String id) throws SQLException {
      this.connection = dataSource.getConnection();
      this.id = id;
      try (Statement statement = connection.createStatement();
          ResultSet rs = statement.executeQuery("SELECT pg_backend_pid()")) {
        rs.next();
        this.pid = rs.getInt(1);
      }
    }

    long change(long value) {
      Future<?> bump =
          rivals.submit(
              () -> {
                try (var update =
                    connection.prepareStatement(
                        "UPDATE counters SET version = version + 1 WHERE id = ?")) {
                  update.setString(1, id);
                  update.executeUpdate();
                }
                return null;
              });
      bumps.incrementAndGet();
      await().atMost(Duration.ofSeconds(20)).until(() -> bump.isDone() || waitsForALock());
      if (!bump.isDone()) {
        bumpsThatWaited.incrementAndGet();
      }
      return value + 1;
    }

    private boolean waitsForALock() {
      return dsl.fetchExists(
          dsl.selectOne()
              .from("pg_stat_activity")
              .where("pid = ? AND wait_event_type = 'Lock'", pid));
    }

    @Override
    public void close() throws SQLException {
      connection.close();
    }
  }

  private static double count(SimpleMeterRegistry registry, String name) {
    return registry.get(name).tag("name", "turns").counter().count();
  }

  @Test
  void aWriterThatLosesEveryRaceTakesItsTurnAndWritesWhereTheLockFreeRetriesGiveUp()
      throws Exception {
    String id = newId();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    VersionColumnStore<String, Long> store =
        VersionColumnStore.create(schema.dataSource(), config().metrics(registry, "turns").build());
    Version first = store.insert(id, 0L).get().version();

    try (Rival rival = new Rival(schema.dataSource(), id)) {
      Either<?, Versioned<Long>> outcome = store.update(id, rival::change);

      assertThat(outcome.isRight()).as("written in its turn: %s", outcome).isTrue();
      assertThat(rival.bumpsThatWaited).as("the last bump queued behind the turn").hasValue(1);
      assertThat(rival.bumps.get())
          .as("it lost a few races first, then took its turn")
          .isBetween(2, ATTEMPTS - 1);
      assertThat(count(registry, "nolock.cas.turns")).isEqualTo(1.0);
      await()
          .atMost(Duration.ofSeconds(20))
          .until(
              () ->
                  store.read(id).get().version().asLong()
                      == first.asLong() + rival.bumps.get() + 1);
      // every bump landed, before the turn or after it; the turn's write is there too
      assertThat(store.read(id).get().value()).isEqualTo(1L);
    }
  }

  @Test
  void controlWithoutTurnsTheSameWriterGivesUp() throws Exception {
    String id = newId();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    VersionColumnStore<String, Long> store =
        VersionColumnStore.create(
            schema.dataSource(), config().neverTakeTurn().metrics(registry, "turns").build());
    store.insert(id, 0L);

    try (Rival rival = new Rival(schema.dataSource(), id)) {
      Either<?, Versioned<Long>> outcome = store.update(id, rival::change);

      assertThat(outcome.isLeft()).as("gave up: %s", outcome).isTrue();
      assertThat(rival.bumps).hasValue(ATTEMPTS);
      assertThat(rival.bumpsThatWaited).hasValue(0);
      assertThat(count(registry, "nolock.cas.turns")).isZero();
      assertThat(store.read(id).get().value()).isZero();
    }
  }

  /**
   * A pool of one connection, so that what a killed turn leaves on its connection meets the very
   * next statement of the pool.
   */
  private HikariDataSource poolOfOne() {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(schema.jdbcUrl());
    config.setUsername("postgres");
    config.setMaximumPoolSize(1);
    config.setPoolName("turn-pool-of-one");
    return new HikariDataSource(config);
  }

  @Test
  void aTurnThatSitsIdleIsEndedWithNothingWrittenTheOthersGoOnAndTheUpdateRacesOn()
      throws Exception {
    aTurnStoppedPastTheIdleLimitRacesOn(Stop.IN_ITS_CHANGE);
  }

  @Test
  void aTurnPausedBetweenItsWriteAndItsCommitWroteNothingAndTheUpdateRacesOn() throws Exception {
    aTurnStoppedPastTheIdleLimitRacesOn(Stop.BEFORE_ITS_COMMIT);
  }

  /** Where a turn stops: with the row read and locked, or with the row written, not committed. */
  private enum Stop {
    IN_ITS_CHANGE,
    BEFORE_ITS_COMMIT
  }

  /**
   * A writer's turn stops at {@code stop}, on a pool of one connection (so that what the ended turn
   * leaves on its connection meets the pool's next statement); another writer's compare-and-set
   * goes through once PostgreSQL ends the idle turn; then the stopped writer resumes. Its turn
   * wrote nothing, so its update races on and applies its change once, on the other's value.
   */
  private void aTurnStoppedPastTheIdleLimitRacesOn(Stop stop) throws Exception {
    String id = newId();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    CountDownLatch stopped = new CountDownLatch(1);
    CountDownLatch resume = new CountDownLatch(1);
    try (HikariDataSource pool = poolOfOne()) {
      DataSource dataSource =
          stop == Stop.BEFORE_ITS_COMMIT ? pausingTheFirstCommit(pool, stopped, resume) : pool;
      VersionColumnStore<String, Long> store =
          VersionColumnStore.create(
              dataSource, config().takeTurnAfter(Duration.ZERO).metrics(registry, "turns").build());
      VersionColumnStore<String, Long> others = everyUpdateATurn(schema.dataSource());
      Versioned<Long> start = others.insert(id, 0L).get();
      AtomicInteger changes = new AtomicInteger();
      // the session of the pool's one connection, which the turn will use
      Object pid = DSL.using(pool, SQLDialect.POSTGRES).fetchValue("SELECT pg_backend_pid()");

      Future<Either<?, Versioned<Long>>> paused =
          rivals.submit(
              () ->
                  store.update(
                      id,
                      v -> {
                        if (changes.incrementAndGet() == 1 && stop == Stop.IN_ITS_CHANGE) {
                          stopped.countDown();
                          awaitQuietly(resume);
                        }
                        return v + 100;
                      }));
      assertThat(stopped.await(20, TimeUnit.SECONDS)).isTrue();
      assertThat(changes).as("stopped after its change ran once").hasValue(1);
      if (stop == Stop.BEFORE_ITS_COMMIT) {
        assertThat(others.read(id).get().value()).as("written, not committed").isZero();
        assertThat(
                schema
                    .dsl()
                    .fetchValue(
                        "SELECT count(*) FROM pg_stat_activity WHERE pid = ? AND state ="
                            + " 'idle in transaction' AND query ILIKE 'update%'",
                        pid))
            .as("the turn's UPDATE ran, its transaction idle before the COMMIT")
            .isEqualTo(1L);
      }
      CompletableFuture<Either<?, Versioned<Long>>> other =
          CompletableFuture.supplyAsync(
              () -> others.compareAndSet(id, start.version(), 1L), rivals);

      // freed by the idle limit: well before the control's three limits without it
      await().atMost(VersionColumnStoreConfig.TURN_IDLE_LIMIT.multipliedBy(3)).until(other::isDone);
      resume.countDown();

      assertThat(other.get().isRight())
          .as("the other writer went on, at the version the turn had read: %s", other.get())
          .isTrue();
      Either<?, Versioned<Long>> outcome = paused.get(20, TimeUnit.SECONDS);
      assertThat(outcome.isRight()).as("raced on after its turn ended: %s", outcome).isTrue();
      assertThat(outcome.get().value())
          .as("its change applied once, to the other writer's value: nothing of the turn landed")
          .isEqualTo(101L);
      assertThat(changes).as("the change ran again on the fresh value").hasValue(2);
      assertThat(count(registry, "nolock.cas.turns")).as("no second turn").isEqualTo(1.0);
      assertThat(count(registry, "nolock.cas.turns_ended")).isEqualTo(1.0);
      assertThat(others.read(id).get().value()).isEqualTo(101L);
    }
  }

  /** {@code pool}, whose first {@code COMMIT} counts {@code stopped} down and waits for resume. */
  private static DataSource pausingTheFirstCommit(
      DataSource pool, CountDownLatch stopped, CountDownLatch resume) {
    InvocationHandler commits =
        forwarding(
            pool,
            (method, result) -> {
              if (method.getName().equals("getConnection")) {
                return Proxy.newProxyInstance(
                    Connection.class.getClassLoader(),
                    new Class<?>[] {Connection.class},
                    forwarding(
                        result, (m, r) -> r, m -> pauseAtTheFirstCommit(m, stopped, resume)));
              }
              return result;
            },
            m -> {});
    return (DataSource)
        Proxy.newProxyInstance(
            DataSource.class.getClassLoader(), new Class<?>[] {DataSource.class}, commits);
  }

  private static void pauseAtTheFirstCommit(
      Method method, CountDownLatch stopped, CountDownLatch resume) {
    if (method.getName().equals("commit") && stopped.getCount() > 0) {
      stopped.countDown();
      awaitQuietly(resume);
    }
  }

  /** Calls {@code before}, then {@code real}'s method, and hands its result to {@code after}. */
  private static InvocationHandler forwarding(
      Object real, BiFunction<Method, Object, Object> after, Consumer<Method> before) {
    return (proxy, method, args) -> {
      before.accept(method);
      try {
        return after.apply(method, method.invoke(real, args));
      } catch (InvocationTargetException e) {
        throw e.getCause();
      }
    };
  }

  @Test
  void anUpdateWhoseChangeIsSlowDoesNotTakeATurnThatWouldSitIdle() throws Exception {
    Duration slow = VersionColumnStoreConfig.TURN_IDLE_LIMIT.dividedBy(2);
    SlowChange run = updateWhoseChangeTakes(slow);

    assertThat(run.outcome().isLeft())
        .as("raced and gave up, as without turns: %s", run.outcome())
        .isTrue();
    assertThat(run.bumps()).isEqualTo(ATTEMPTS);
    assertThat(run.bumpsThatWaited()).as("no bump waited behind a turn").isZero();
    assertThat(run.turns()).isZero();
  }

  @Test
  void anUpdateWhoseChangeTakesLessThanHalfTheLimitStillTakesItsTurn() throws Exception {
    Duration quickEnough = VersionColumnStoreConfig.TURN_IDLE_LIMIT.dividedBy(2).minusMillis(100);
    SlowChange run = updateWhoseChangeTakes(quickEnough);

    assertThat(run.outcome().isRight()).as("written in its turn: %s", run.outcome()).isTrue();
    assertThat(run.turns()).isEqualTo(1.0);
  }

  private record SlowChange(
      Either<?, Versioned<Long>> outcome, int bumps, int bumpsThatWaited, double turns) {}

  /**
   * An update that loses every race to a rival writer, whose change function takes {@code duration}
   * on the store's clock each time it runs.
   */
  private SlowChange updateWhoseChangeTakes(Duration duration) throws Exception {
    String id = newId();
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    ManualLeaseClock clock = new ManualLeaseClock();
    VersionColumnStore<String, Long> store =
        VersionColumnStore.create(
            schema.dataSource(), config().clock(clock).metrics(registry, "turns").build());
    store.insert(id, 0L);
    try (Rival rival = new Rival(schema.dataSource(), id)) {
      Either<?, Versioned<Long>> outcome =
          store.update(
              id,
              v -> {
                clock.advance(duration);
                return rival.change(v);
              });
      return new SlowChange(
          outcome,
          rival.bumps.get(),
          rival.bumpsThatWaited.get(),
          count(registry, "nolock.cas.turns"));
    }
  }

  /**
   * A turn on a pool at REPEATABLE READ or SERIALIZABLE whose locked read waited for another
   * transaction's change of the row: PostgreSQL fails the read with a serialization failure (the
   * row changed after the turn's snapshot), which is a lost race, and the next turn writes on the
   * other's value. Under READ COMMITTED the same turn would wait and write at once, with no retry.
   */
  @ParameterizedTest
  @ValueSource(strings = {"TRANSACTION_REPEATABLE_READ", "TRANSACTION_SERIALIZABLE"})
  void underStricterIsolationATurnThatWaitedIsALostRaceAndTheNextTurnWritesOnce(String isolation)
      throws Exception {
    String id = newId();
    String application = "nolock-turn-" + UUID.randomUUID().toString().substring(0, 8);
    HikariConfig poolConfig = new HikariConfig();
    poolConfig.setJdbcUrl(schema.jdbcUrl());
    poolConfig.setUsername("postgres");
    poolConfig.setMaximumPoolSize(2);
    poolConfig.setTransactionIsolation(isolation);
    poolConfig.addDataSourceProperty("ApplicationName", application);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (HikariDataSource pool = new HikariDataSource(poolConfig);
        Connection holder = schema.dataSource().getConnection()) {
      assertThat(DSL.using(pool, SQLDialect.POSTGRES).fetchValue("SHOW transaction_isolation"))
          .isIn("repeatable read", "serializable");
      VersionColumnStore<String, Long> store =
          VersionColumnStore.create(
              pool, config().takeTurnAfter(Duration.ZERO).metrics(registry, "turns").build());
      store.insert(id, 0L);
      holder.setAutoCommit(false);
      try (var bump =
          holder.prepareStatement(
              "UPDATE counters SET value = 50, version = version + 1 WHERE id = ?")) {
        bump.setString(1, id);
        assertThat(bump.executeUpdate()).isEqualTo(1);
      }
      AtomicInteger changes = new AtomicInteger();
      CompletableFuture<Either<Conflict, Versioned<Long>>> update =
          CompletableFuture.supplyAsync(
              () ->
                  store.update(
                      id,
                      v -> {
                        changes.incrementAndGet();
                        return v + 1;
                      }));
      await("the turn's locked read waits for the other transaction's row lock")
          .atMost(Duration.ofSeconds(20))
          .until(
              () ->
                  dsl.fetchValue(
                          "SELECT count(*) FROM pg_stat_activity"
                              + " WHERE application_name = ? AND wait_event_type = 'Lock'",
                          application)
                      .equals(1L));
      holder.commit();

      Either<Conflict, Versioned<Long>> outcome = update.get(20, TimeUnit.SECONDS);
      assertThat(outcome.isRight()).as("written in a later turn: %s", outcome).isTrue();
      assertThat(store.read(id).get().value()).as("on the other's value, once").isEqualTo(51L);
      assertThat(changes).as("the failed turn ran no change").hasValue(1);
      assertThat(count(registry, "nolock.cas.retries"))
          .as("the serialization failure was a lost race")
          .isEqualTo(1.0);
      assertThat(count(registry, "nolock.cas.turns")).isEqualTo(2.0);
    }
  }

  @Test
  void theTurnsIdleLimitDoesNotOutliveItsTransactionOnAPooledConnection() {
    String id = newId();
    try (HikariDataSource pool = poolOfOne()) {
      DSLContext sameConnection = DSL.using(pool, SQLDialect.POSTGRES);
      String before =
          String.valueOf(sameConnection.fetchValue("SHOW idle_in_transaction_session_timeout"));
      Object pid = sameConnection.fetchValue("SELECT pg_backend_pid()");
      SimpleMeterRegistry registry = new SimpleMeterRegistry();
      VersionColumnStore<String, Long> store =
          VersionColumnStore.create(
              pool, config().takeTurnAfter(Duration.ZERO).metrics(registry, "turns").build());
      store.insert(id, 0L);

      assertThat(store.update(id, v -> v + 1).isRight()).isTrue();
      assertThat(count(registry, "nolock.cas.turns")).as("it was a turn").isEqualTo(1.0);

      assertThat(sameConnection.fetchValue("SELECT pg_backend_pid()"))
          .as("the same server session, which ran the turn")
          .isEqualTo(pid);
      assertThat(
              String.valueOf(sameConnection.fetchValue("SHOW idle_in_transaction_session_timeout")))
          .as("the next user of the connection has the server's setting, not the turn's")
          .isEqualTo(before);
    }
  }

  @Test
  void controlALockedReadWithoutTheIdleLimitKeepsTheOtherWritersWaiting() throws Exception {
    String id = newId();
    VersionColumnStore<String, Long> store =
        VersionColumnStore.create(schema.dataSource(), config().build());
    Versioned<Long> start = store.insert(id, 0L).get();
    CountDownLatch locked = new CountDownLatch(1);
    CountDownLatch resume = new CountDownLatch(1);

    // The turn's statements, without set_config: a session that pauses holding the row.
    Future<?> holder =
        rivals.submit(
            () -> {
              dsl.transaction(
                  configuration -> {
                    configuration
                        .dsl()
                        .fetch("SELECT version FROM counters WHERE id = ? FOR NO KEY UPDATE", id);
                    locked.countDown();
                    awaitQuietly(resume);
                  });
              return null;
            });
    assertThat(locked.await(20, TimeUnit.SECONDS)).isTrue();
    CompletableFuture<Either<?, Versioned<Long>>> other =
        CompletableFuture.supplyAsync(() -> store.compareAndSet(id, start.version(), 1L), rivals);

    await()
        .during(VersionColumnStoreConfig.TURN_IDLE_LIMIT.multipliedBy(3))
        .atMost(VersionColumnStoreConfig.TURN_IDLE_LIMIT.plusSeconds(10))
        .until(() -> !other.isDone());
    resume.countDown();
    holder.get(20, TimeUnit.SECONDS);
    assertThat(other.get(20, TimeUnit.SECONDS).isRight()).isTrue();
  }

  @Test
  void whatTheChangeThrowsInItsTurnReachesTheCallerUnchangedAndNothingIsWritten() {
    String id = newId();
    VersionColumnStore<String, Long> store = everyUpdateATurn(schema.dataSource());
    store.insert(id, 0L);
    DataAccessException own = new DataAccessException("the change's own database work failed");

    Throwable thrown =
        catchThrowable(
            () ->
                store.update(
                    id,
                    v -> {
                      throw own;
                    }));

    assertThat(thrown).as("not taken for the store's own failure").isSameAs(own);
    assertThat(store.read(id).get().value()).isZero();
  }

  @Test
  void aRowDeletedAndInsertedAgainWhileTheTurnWaitedIsNotTakenForAMissingKey() throws Exception {
    String id = newId();
    VersionColumnStore<String, Long> store = everyUpdateATurn(schema.dataSource());
    store.insert(id, 0L);
    CountDownLatch replaced = new CountDownLatch(1);
    CountDownLatch commit = new CountDownLatch(1);
    Future<?> replacer =
        rivals.submit(
            () -> {
              dsl.transaction(
                  configuration -> {
                    DSLContext tx = configuration.dsl();
                    tx.execute("DELETE FROM counters WHERE id = ?", id);
                    tx.execute("INSERT INTO counters VALUES (?, 5, 7)", id);
                    replaced.countDown();
                    awaitQuietly(commit);
                  });
              return null;
            });
    assertThat(replaced.await(20, TimeUnit.SECONDS)).isTrue();
    Future<Either<?, Versioned<Long>>> updating = rivals.submit(() -> store.update(id, v -> v + 1));
    await()
        .atMost(Duration.ofSeconds(20))
        .until(
            () ->
                dsl.fetchExists(
                    dsl.selectOne()
                        .from("pg_stat_activity")
                        .where(
                            "wait_event_type = 'Lock' AND query LIKE '%for no key update%'"
                                + " AND query LIKE '%counters%'")));
    commit.countDown();
    replacer.get(20, TimeUnit.SECONDS);

    Either<?, Versioned<Long>> outcome = updating.get(20, TimeUnit.SECONDS);
    assertThat(outcome.isRight()).as("written on the new row: %s", outcome).isTrue();
    assertThat(store.read(id).get().value()).isEqualTo(8L);
  }

  @Test
  void aTurnWhoseWriteAnswerWasLostWroteNothingAndTheUpdateRacesOn() {
    String id = newId();
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      SimpleMeterRegistry registry = new SimpleMeterRegistry();
      VersionColumnStore<String, Long> healthy = everyUpdateATurn(schema.dataSource());
      VersionColumnStore<String, Long> store =
          VersionColumnStore.create(
              faults.dataSource(),
              config().takeTurnAfter(Duration.ZERO).metrics(registry, "turns").build());
      healthy.insert(id, 100L);
      AtomicInteger calls = new AtomicInteger();
      InjectedFault fault =
          faults.onNextStatement(
              FaultKind.ANSWER_LOST,
              JdbcFaults.sqlContaining("update \"counters\" set"),
              () ->
                  assertThat(healthy.read(id).get().value())
                      .as("the UPDATE ran in the turn's transaction, which never committed")
                      .isEqualTo(100L));

      Either<?, Versioned<Long>> outcome =
          store.update(
              id,
              v -> {
                calls.incrementAndGet();
                return v + 10;
              });

      fault.assertFired();
      assertThat(outcome.isRight()).as("raced on: %s", outcome).isTrue();
      assertThat(healthy.read(id).get().value()).as("+10 applied once").isEqualTo(110L);
      assertThat(calls).as("once in the turn, once racing").hasValue(2);
      assertThat(count(registry, "nolock.cas.turns")).isEqualTo(1.0);
      assertThat(count(registry, "nolock.cas.turns_ended")).isEqualTo(1.0);
    }
  }

  @Test
  void aTurnWhoseCommitAnswerWasLostIsUnknownAndAppliedOnce() {
    String id = newId();
    try (JdbcFaults faults = JdbcFaults.pool(schema.jdbcUrl())) {
      VersionColumnStore<String, Long> healthy = everyUpdateATurn(schema.dataSource());
      VersionColumnStore<String, Long> store = everyUpdateATurn(faults.dataSource());
      healthy.insert(id, 100L);
      AtomicInteger calls = new AtomicInteger();
      InjectedFault fault = faults.onNextCommit(FaultKind.ANSWER_LOST);

      Throwable thrown =
          catchThrowable(
              () ->
                  store.update(
                      id,
                      v -> {
                        calls.incrementAndGet();
                        return v + 10;
                      }));

      fault.assertFired();
      assertThat(healthy.read(id).get().value()).as("+10 applied exactly once").isEqualTo(110L);
      assertThat(calls).as("no retry after the lost answer").hasValue(1);
      assertThat(thrown)
          .isInstanceOf(BackendUnavailableException.class)
          .hasMessageContaining("outcome is unknown");
    }
  }

  private static void awaitQuietly(CountDownLatch latch) {
    try {
      latch.await(60, TimeUnit.SECONDS);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
  }
}
