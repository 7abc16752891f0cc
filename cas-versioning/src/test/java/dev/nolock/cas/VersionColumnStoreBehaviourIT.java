package dev.nolock.cas;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.patterns.Conflict;
import dev.nolock.patterns.ManualLeaseClock;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.vavr.control.Either;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.JSONB;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/** What the contract does not cover: give-ups, schema trouble, pools, isolation, other types. */
@ExtendWith(PostgresExtension.class)
class VersionColumnStoreBehaviourIT {

  private static final String TABLE = "counters";

  private final PostgresSchema schema;
  private final DSLContext dsl;

  VersionColumnStoreBehaviourIT(PostgresSchema schema) {
    this.schema = schema;
    this.dsl = schema.dsl();
  }

  @BeforeAll
  static void createTable(PostgresSchema schema) {
    schema.dsl().execute(Tables.COUNTERS_DDL);
  }

  private VersionColumnStore<String, Long> store(
      DataSource dataSource, RetryPolicy retry, SimpleMeterRegistry registry) {
    return VersionColumnStore.create(
        dataSource,
        VersionColumnStoreConfig.custom(TABLE, String.class, ValueCodec.longs())
            .retryPolicy(retry)
            .clock(new ManualLeaseClock()) // backoff waits advance it instead of sleeping
            .metrics(registry, "behaviour")
            .build());
  }

  private static double count(SimpleMeterRegistry registry, String name) {
    return registry.get(name).tag("component", "store").tag("name", "behaviour").counter().count();
  }

  @Test
  void aGiveUpReturnsTheLastConflictWithTheVersionThatBeatIt() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    VersionColumnStore<String, Long> store =
        store(schema.dataSource(), RetryPolicy.custom().maxAttempts(3).build(), registry);
    String id = "give-up-" + UUID.randomUUID();
    long first = store.insert(id, 0L).get().version().asLong();
    AtomicInteger calls = new AtomicInteger();

    // Every call of the change lets a concurrent writer in first, so every compare-and-set loses.
    Either<Conflict, Versioned<Long>> outcome =
        store.update(
            id,
            v -> {
              calls.incrementAndGet();
              Tables.bumpBehindTheStoresBack(dsl, TABLE, id);
              return v + 1;
            });

    assertThat(calls).hasValue(3);
    assertThat(outcome.isLeft()).isTrue();
    assertThat(outcome.getLeft().current()).contains(Version.of(first + 3)); // three bumps
    assertThat(store.read(id).get()).isEqualTo(new Versioned<>(300L, Version.of(first + 3)));
    assertThat(count(registry, "nolock.cas.attempts")).isEqualTo(1 + 3); // the insert, 3 tries
    assertThat(count(registry, "nolock.conflicts")).isEqualTo(3);
    assertThat(count(registry, "nolock.cas.retries")).isEqualTo(2);
    assertThat(count(registry, "nolock.cas.give_ups")).isEqualTo(1);
  }

  @Test
  void updateOfAMissingKeyNeverCallsTheChangeNorWrites() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    VersionColumnStore<String, Long> store =
        store(schema.dataSource(), RetryPolicy.ofDefaults(), registry);
    AtomicInteger calls = new AtomicInteger();

    Either<Conflict, Versioned<Long>> outcome =
        store.update("never-" + UUID.randomUUID(), v -> calls.incrementAndGet() + v);

    assertThat(outcome.getLeft().isMissing()).isTrue();
    assertThat(calls).hasValue(0);
    assertThat(count(registry, "nolock.cas.attempts")).isZero();
    assertThat(count(registry, "nolock.cas.give_ups")).isZero();
  }

  @Test
  void aRowDeletedBetweenReadAndWriteEndsTheUpdateWithoutRetrying() {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    VersionColumnStore<String, Long> store =
        store(schema.dataSource(), RetryPolicy.ofDefaults(), registry);
    String id = "deleted-" + UUID.randomUUID();
    Version v1 = store.insert(id, 5L).get().version();
    AtomicInteger calls = new AtomicInteger();

    Either<Conflict, Versioned<Long>> outcome =
        store.update(
            id,
            v -> {
              calls.incrementAndGet();
              store.delete(id, v1);
              return v + 1;
            });

    assertThat(outcome.getLeft().isMissing()).isTrue();
    assertThat(calls).hasValue(1);
    assertThat(count(registry, "nolock.cas.retries")).isZero();
    assertThat(count(registry, "nolock.cas.give_ups")).isZero();
  }

  @Test
  void theExceptionThrownByTheChangeReachesTheCallerAndNothingIsWritten() {
    VersionColumnStore<String, Long> store =
        store(schema.dataSource(), RetryPolicy.ofDefaults(), new SimpleMeterRegistry());
    String id = "throws-" + UUID.randomUUID();
    Versioned<Long> inserted = store.insert(id, 1L).get();

    assertThatThrownBy(
            () ->
                store.update(
                    id,
                    v -> {
                      throw new ArithmeticException("overdrawn");
                    }))
        .isInstanceOf(ArithmeticException.class)
        .hasMessage("overdrawn");
    assertThat(store.read(id).get()).isEqualTo(inserted);
  }

  @Test
  void aChangeReturningNullIsRefused() {
    VersionColumnStore<String, Long> store =
        store(schema.dataSource(), RetryPolicy.ofDefaults(), new SimpleMeterRegistry());
    String id = "null-" + UUID.randomUUID();
    store.insert(id, 1L);

    assertThatThrownBy(() -> store.update(id, v -> null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("returned null");
  }

  @Test
  void aKeyOfAnotherTypeOrAVersionFromAnotherStoreIsRefused() {
    @SuppressWarnings({"unchecked", "rawtypes"})
    VersionColumnStore<Object, Long> raw =
        (VersionColumnStore)
            store(schema.dataSource(), RetryPolicy.ofDefaults(), new SimpleMeterRegistry());
    VersionColumnStore<String, Long> store =
        store(schema.dataSource(), RetryPolicy.ofDefaults(), new SimpleMeterRegistry());

    assertThatThrownBy(() -> raw.read(42))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("java.lang.Integer")
        .hasMessageContaining("java.lang.String");
    assertThatThrownBy(
            () -> store.compareAndSet("x", new Version(UUID.randomUUID().toString()), 1L))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not issued by a version column store");
  }

  @Test
  void aMissingColumnIsAnIllegalStateNamingTheTableAndTheFix() {
    dsl.execute("CREATE TABLE legacy_counters (id text PRIMARY KEY, value bigint NOT NULL)");
    VersionColumnStore<String, Long> store =
        VersionColumnStore.create(
            schema.dataSource(),
            VersionColumnStoreConfig.custom("legacy_counters", String.class, ValueCodec.longs())
                .build());

    assertThatThrownBy(() -> store.read("a"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("legacy_counters")
        .hasMessageContaining("ALTER TABLE legacy_counters ADD version bigint");
  }

  @Test
  void aMissingTableNamesTheDdlThatFitsTheConfiguration() {
    VersionColumnStore<UUID, JSONB> store =
        VersionColumnStore.create(
            schema.dataSource(),
            VersionColumnStoreConfig.custom(
                    "nowhere", UUID.class, ValueCodec.<JSONB, JSONB>of(JSONB.class, v -> v, v -> v))
                .build());

    assertThatThrownBy(() -> store.insert(UUID.randomUUID(), JSONB.valueOf("{}")))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(
            "CREATE TABLE nowhere (id uuid NOT NULL, version bigint NOT NULL, value jsonb NOT"
                + " NULL, PRIMARY KEY (id))");
  }

  @Test
  void aCodecThatDoesNotFitTheColumnTypeIsAnIllegalState() {
    VersionColumnStore<String, String> store =
        VersionColumnStore.create(
            schema.dataSource(),
            VersionColumnStoreConfig.custom(TABLE, String.class, ValueCodec.strings()).build());

    assertThatThrownBy(() -> store.insert("typed-" + UUID.randomUUID(), "seven"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining(TABLE)
        .hasMessageContaining("does not match the configuration");
  }

  @Test
  void aKeyColumnThatIsNotUniqueIsRefusedByInsertAndReportedByCompareAndSet() {
    dsl.execute("CREATE TABLE loose_counters (id text, version bigint NOT NULL, value bigint)");
    dsl.execute("INSERT INTO loose_counters VALUES ('twice', 1, 1), ('twice', 1, 2)");
    VersionColumnStore<String, Long> store =
        VersionColumnStore.create(
            schema.dataSource(),
            VersionColumnStoreConfig.custom("loose_counters", String.class, ValueCodec.longs())
                .build());

    assertThatThrownBy(() -> store.insert("once", 1L))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("no unique key");
    assertThatThrownBy(() -> store.read("twice"))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("matched 2 rows")
        .hasMessageContaining("ADD PRIMARY KEY (id)");
    assertThatThrownBy(() -> store.compareAndSet("twice", Version.of(1), 3L))
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("is not unique");
  }

  @Test
  void uuidKeysAndJsonValuesInASchemaQualifiedTableRoundTrip() {
    String qualified = schema.schemaName() + ".documents";
    dsl.execute(
        "CREATE TABLE "
            + qualified
            + " (doc_id uuid PRIMARY KEY, rev bigint NOT NULL, body jsonb NOT NULL)");
    VersionColumnStore<UUID, Note> store =
        VersionColumnStore.create(
            schema.dataSource(),
            VersionColumnStoreConfig.custom(
                    qualified, UUID.class, ValueCodec.json(Note::toJson, Note::fromJson))
                .keyColumn("doc_id")
                .versionColumn("rev")
                .valueColumn("body")
                .build());
    UUID id = UUID.randomUUID();

    Versioned<Note> first = store.insert(id, new Note("draft", 1)).get();
    Versioned<Note> second = store.update(id, n -> new Note("final", n.edits() + 1)).get();

    assertThat(store.read(id).get())
        .isEqualTo(new Versioned<>(new Note("final", 2), second.version()));
    assertThat(second.version()).isEqualTo(Version.of(first.version().asLong() + 1));
    assertThat(store.compareAndSet(id, first.version(), new Note("stale", 0)).getLeft().current())
        .contains(second.version());
  }

  @Test
  void onAPoolWithAutocommitOffTheStoresWritesAreCommitted() {
    HikariConfig config = poolConfig("autocommit-off");
    config.setAutoCommit(false);
    try (HikariDataSource pool = new HikariDataSource(config)) {
      VersionColumnStore<String, Long> store =
          store(pool, RetryPolicy.ofDefaults(), new SimpleMeterRegistry());
      String id = "durable-" + UUID.randomUUID();

      Version v1 = store.insert(id, 1L).get().version();
      store.compareAndSet(id, v1, 2L).get();
      store.update(id, v -> v * 10).get();

      // read on another pool: only committed work is visible there
      assertThat(Tables.versionOf(dsl, TABLE, id)).isEqualTo(v1.asLong() + 2);
      assertThat(dsl.fetchValue("SELECT value FROM counters WHERE id = ?", id)).isEqualTo(20L);
    }
  }

  @Test
  void underRepeatableReadASerializationFailureIsAConflictNotAnException() throws Exception {
    String application = "nolock-rr-" + UUID.randomUUID().toString().substring(0, 8);
    HikariConfig config = poolConfig(application);
    config.setTransactionIsolation("TRANSACTION_REPEATABLE_READ");
    config.addDataSourceProperty("ApplicationName", application);
    String id = "rr-" + UUID.randomUUID();
    try (HikariDataSource pool = new HikariDataSource(config);
        Connection holder = schema.dataSource().getConnection()) {
      assertThat(DSL.using(pool, SQLDialect.POSTGRES).fetchValue("SHOW transaction_isolation"))
          .isEqualTo("repeatable read");
      VersionColumnStore<String, Long> store =
          store(pool, RetryPolicy.ofDefaults(), new SimpleMeterRegistry());
      Version v1 = store.insert(id, 1L).get().version();

      // Another transaction changes the row and holds its lock...
      holder.setAutoCommit(false);
      try (PreparedStatement bump =
          holder.prepareStatement(
              "UPDATE counters SET value = 50, version = version + 1 WHERE id = ?")) {
        bump.setString(1, id);
        assertThat(bump.executeUpdate()).isEqualTo(1);
      }
      // ...while the store's compare-and-set, based on the same version, waits for that lock.
      CompletableFuture<Either<Conflict, Versioned<Long>>> write =
          CompletableFuture.supplyAsync(() -> store.compareAndSet(id, v1, 2L));
      await().atMost(Duration.ofSeconds(10)).until(() -> waitingForALock(application));
      holder.commit(); // PostgreSQL now fails the waiting statement with SQLSTATE 40001

      Either<Conflict, Versioned<Long>> outcome = write.get(10, TimeUnit.SECONDS);
      assertThat(outcome.isLeft()).as("a lost race, reported as a value").isTrue();
      assertThat(outcome.getLeft().current()).contains(Version.of(v1.asLong() + 1));
      assertThat(store.read(id).get().value()).isEqualTo(50L);
    }
  }

  @Test
  void underRepeatableReadConcurrentUpdatesLoseNothingAndThrowNothing() throws Exception {
    HikariConfig config = poolConfig("rr-fuzz");
    config.setTransactionIsolation("TRANSACTION_REPEATABLE_READ");
    String id = "rr-fuzz-" + UUID.randomUUID();
    int writers = 4;
    int increments = 100;
    try (HikariDataSource pool = new HikariDataSource(config)) {
      VersionColumnStore<String, Long> store =
          VersionColumnStore.create(
              pool,
              VersionColumnStoreConfig.custom(TABLE, String.class, ValueCodec.longs())
                  .retryPolicy(VersionColumnStoreIT.TIME_CAP_ONLY)
                  .build());
      store.insert(id, 0L);
      ExecutorService threads = Executors.newFixedThreadPool(writers);
      CountDownLatch start = new CountDownLatch(1);
      try {
        List<Future<Integer>> gaveUp = new ArrayList<>();
        for (int w = 0; w < writers; w++) {
          gaveUp.add(
              threads.submit(
                  () -> {
                    start.await();
                    int lost = 0;
                    for (int i = 0; i < increments; i++) {
                      lost += store.update(id, v -> v + 1).isLeft() ? 1 : 0;
                    }
                    return lost;
                  }));
        }
        start.countDown();
        for (Future<Integer> f : gaveUp) {
          assertThat(f.get(5, TimeUnit.MINUTES)).isZero();
        }
      } finally {
        threads.shutdownNow();
      }
      assertThat(store.read(id).get().value()).isEqualTo((long) writers * increments);
    }
  }

  private HikariConfig poolConfig(String name) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(schema.jdbcUrl());
    config.setPoolName(name);
    config.setMaximumPoolSize(4);
    config.setMinimumIdle(0);
    return config;
  }

  private boolean waitingForALock(String application) {
    return dsl.fetchValue(
            "SELECT count(*) FROM pg_stat_activity"
                + " WHERE application_name = ? AND wait_event_type = 'Lock'",
            application)
        .equals(1L);
  }

  /** A JSON value with its own tiny mapper, as a user would plug in Jackson. */
  record Note(String text, int edits) {
    String toJson() {
      return "{\"text\": \"" + text + "\", \"edits\": " + edits + "}";
    }

    static Note fromJson(String json) {
      // PostgreSQL hands jsonb back normalised: {"text": "...", "edits": n}, keys sorted by length
      String text = json.replaceAll(".*\"text\": \"([^\"]*)\".*", "$1");
      int edits = Integer.parseInt(json.replaceAll(".*\"edits\": (\\d+).*", "$1"));
      return new Note(text, edits);
    }
  }
}
