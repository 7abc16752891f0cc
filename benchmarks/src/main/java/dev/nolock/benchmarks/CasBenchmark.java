package dev.nolock.benchmarks;

import dev.nolock.cas.ValueCodec;
import dev.nolock.cas.VersionColumnStore;
import dev.nolock.cas.VersionColumnStoreConfig;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.Versioned;
import io.vavr.control.Option;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.TableField;
import org.jooq.UniqueKey;
import org.jooq.conf.Settings;
import org.jooq.exception.DataChangedException;
import org.jooq.impl.DSL;
import org.jooq.impl.Internal;
import org.jooq.impl.SQLDataType;
import org.jooq.impl.TableImpl;
import org.jooq.impl.UpdatableRecordImpl;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.Param;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.TearDown;
import org.openjdk.jmh.infra.BenchmarkParams;

/**
 * Increment a counter for a key with compare-and-swap on a version column: read the row, write
 * {@code value + 1} only if the version is still the one read. One attempt per invocation; a lost
 * race is a conflict, not retried.
 *
 * <ul>
 *   <li>{@code casRawJdbc}: the floor, the store's statements through plain JDBC on the same pool,
 *       each with the store's query timeout: {@code SELECT version, value}, {@code UPDATE ... WHERE
 *       id = ? AND version = ? RETURNING version}, and after a lost race the store's {@code SELECT
 *       version} of the row that won.
 *   <li>{@code casVersionColumnStore}: nolock's {@code VersionColumnStore.read} + {@code
 *       compareAndSet} (jOOQ, validation, {@code RETURNING version}).
 *   <li>{@code casJooqOptimisticLocking}: the peer, jOOQ's {@code UpdatableRecord.store()} with
 *       {@code executeWithOptimisticLocking} on a generated-style table with a record version.
 * </ul>
 */
@State(Scope.Benchmark)
@BenchmarkMode(Mode.Throughput)
public class CasBenchmark {

  /** 1 is the hot key; 10000 spreads the writes. */
  @Param({"1", "10000"})
  public int keys;

  private Bench.PgSchema schema;
  private VersionColumnStore<Long, Long> store;

  /** The store's per-statement timeout, which the floor sets on the same statements. */
  private int queryTimeoutSeconds;

  private DSLContext optimistic;

  @Setup(Level.Trial)
  public void setUp(BenchmarkParams params) {
    schema = Bench.freshSchema(params.getThreads());
    schema.execute(
        "CREATE TABLE counters (id bigint PRIMARY KEY, version bigint NOT NULL,"
            + " value bigint NOT NULL)");
    fill();
    VersionColumnStoreConfig<Long, Long> config =
        VersionColumnStoreConfig.custom("counters", Long.class, ValueCodec.longs())
            .retryPolicy(RetryPolicy.noRetry())
            .build();
    store = VersionColumnStore.create(schema.dataSource(), config);
    queryTimeoutSeconds = Math.toIntExact(config.queryTimeout().toSeconds());
    optimistic =
        DSL.using(
            schema.dataSource(),
            SQLDialect.POSTGRES,
            new Settings().withExecuteWithOptimisticLocking(true));
  }

  private void fill() {
    schema.execute(
        "INSERT INTO counters SELECT g, 1, 0 FROM generate_series(0, " + (keys - 1) + ") g");
    schema.execute("ANALYZE counters");
  }

  @TearDown(Level.Trial)
  public void tearDown() {
    schema.close();
  }

  @Benchmark
  public void casRawJdbc(Outcomes outcomes) throws SQLException {
    long id = Bench.pick(keys);
    try (Connection connection = schema.dataSource().getConnection()) {
      long version;
      long value;
      try (PreparedStatement read =
          connection.prepareStatement("SELECT version, value FROM counters WHERE id = ?")) {
        read.setQueryTimeout(queryTimeoutSeconds);
        read.setLong(1, id);
        try (ResultSet row = read.executeQuery()) {
          row.next();
          version = row.getLong(1);
          value = row.getLong(2);
        }
      }
      boolean won;
      try (PreparedStatement write =
          connection.prepareStatement(
              "UPDATE counters SET value = ?, version = version + 1"
                  + " WHERE id = ? AND version = ? RETURNING version")) {
        write.setQueryTimeout(queryTimeoutSeconds);
        write.setLong(1, value + 1);
        write.setLong(2, id);
        write.setLong(3, version);
        try (ResultSet row = write.executeQuery()) {
          won = row.next();
        }
      }
      if (!won) {
        // The store reads the version that beat it, for the conflict it returns.
        try (PreparedStatement current =
            connection.prepareStatement("SELECT version FROM counters WHERE id = ?")) {
          current.setQueryTimeout(queryTimeoutSeconds);
          current.setLong(1, id);
          try (ResultSet row = current.executeQuery()) {
            row.next();
          }
        }
      }
      outcomes.of(won);
    }
  }

  @Benchmark
  public void casVersionColumnStore(Outcomes outcomes) {
    long id = Bench.pick(keys);
    Option<Versioned<Long>> current = store.read(id);
    outcomes.of(
        store.compareAndSet(id, current.get().version(), current.get().value() + 1).isRight());
  }

  @Benchmark
  public void casJooqOptimisticLocking(Outcomes outcomes) {
    long id = Bench.pick(keys);
    CounterRecord counter = optimistic.fetchSingle(Counters.COUNTERS, Counters.COUNTERS.ID.eq(id));
    counter.set(Counters.COUNTERS.VALUE, counter.get(Counters.COUNTERS.VALUE) + 1);
    try {
      counter.store();
      outcomes.of(true);
    } catch (DataChangedException lost) {
      outcomes.of(false);
    }
  }

  /** What jOOQ's code generator writes for {@code counters} with a record version field. */
  static final class Counters extends TableImpl<CounterRecord> {
    private static final long serialVersionUID = 1L;
    static final Counters COUNTERS = new Counters();

    final TableField<CounterRecord, Long> ID =
        createField(DSL.name("id"), SQLDataType.BIGINT.nullable(false), this);
    final TableField<CounterRecord, Long> VERSION =
        createField(DSL.name("version"), SQLDataType.BIGINT.nullable(false), this);
    final TableField<CounterRecord, Long> VALUE =
        createField(DSL.name("value"), SQLDataType.BIGINT.nullable(false), this);

    private Counters() {
      super(DSL.name("counters"));
    }

    @Override
    public Class<CounterRecord> getRecordType() {
      return CounterRecord.class;
    }

    @Override
    public UniqueKey<CounterRecord> getPrimaryKey() {
      return Internal.createUniqueKey(this, DSL.name("counters_pkey"), ID);
    }

    @Override
    public TableField<CounterRecord, Long> getRecordVersion() {
      return VERSION;
    }
  }

  /** The generated record class, reduced to what the benchmark uses. */
  public static final class CounterRecord extends UpdatableRecordImpl<CounterRecord> {
    private static final long serialVersionUID = 1L;

    public CounterRecord() {
      super(Counters.COUNTERS);
    }
  }
}
