package dev.nolock.cas;

import dev.nolock.cas.internal.Codecs;
import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.Names;
import dev.nolock.patterns.RetryPolicy;
import dev.nolock.patterns.sql.SqlNames;
import io.micrometer.core.instrument.MeterRegistry;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.Set;
import java.util.UUID;
import org.jooq.Name;

/**
 * Immutable settings of a {@link VersionColumnStore}: which of your tables and columns hold the
 * rows, how values are stored, how {@code update} retries and where metrics go. Built with {@link
 * #custom(String, Class, ValueCodec)}; each setter validates at once.
 *
 * <p>Defaults: key column {@value #DEFAULT_KEY_COLUMN}, version column {@value
 * #DEFAULT_VERSION_COLUMN}, value column {@value #DEFAULT_VALUE_COLUMN}, retry {@link
 * RetryPolicy#ofDefaults()} (10 attempts within 10 s, jittered backoff from 5 ms to 1 s), clock
 * {@link LeaseClock#system()}, query timeout {@link #DEFAULT_QUERY_TIMEOUT}, no metrics.
 *
 * <p>The key column must be unique (a primary key or a unique index on it alone): a compare-and-set
 * is "the row with this key", and {@code insert} uses {@code ON CONFLICT (key)}.
 *
 * @param <K> the key type: {@code String}, {@code Long}, {@code Integer} or {@code UUID}
 * @param <T> the value type
 */
public final class VersionColumnStoreConfig<K, T> {

  public static final String DEFAULT_KEY_COLUMN = "id";
  public static final String DEFAULT_VERSION_COLUMN = "version";
  public static final String DEFAULT_VALUE_COLUMN = "value";

  /** How long one statement may run before the driver cancels it. */
  public static final Duration DEFAULT_QUERY_TIMEOUT = Duration.ofSeconds(5);

  /** Longest query timeout accepted: every statement touches rows by key; minutes mean trouble. */
  public static final Duration MAX_QUERY_TIMEOUT = Duration.ofMinutes(5);

  /**
   * How long an {@code update} loses races before its next attempt takes its turn on the row: 20
   * ms, a few times a hot row's p99 wait, so that the turn is for the writers the backoff left
   * behind, not for every writer that lost once.
   */
  public static final Duration DEFAULT_TAKE_TURN_AFTER = Duration.ofMillis(20);

  /** Longest {@link Builder#takeTurnAfter} accepted. */
  public static final Duration MAX_TAKE_TURN_AFTER = Duration.ofMinutes(1);

  /**
   * The longest a turn may keep the row locked while its session is idle (the caller paused, or its
   * change function ran long) before PostgreSQL ends the session and the other writers go on. The
   * update whose turn was ended races on without turns; one whose change function has taken half
   * this long takes no turn.
   */
  public static final Duration TURN_IDLE_LIMIT = Duration.ofSeconds(1);

  /** The key types the store binds and compares natively. */
  public static final Set<Class<?>> KEY_TYPES =
      Set.of(String.class, Long.class, Integer.class, UUID.class);

  private final String table;
  private final String keyColumn;
  private final String versionColumn;
  private final String valueColumn;
  private final Class<K> keyType;
  private final ValueCodec<T, ?> codec;
  private final RetryPolicy retryPolicy;
  private final LeaseClock clock;
  private final Duration queryTimeout;
  private final Duration takeTurnAfter;
  private final MeterRegistry registry;
  private final String instanceName;

  private VersionColumnStoreConfig(Builder<K, T> builder) {
    this.table = builder.table;
    this.keyColumn = builder.keyColumn;
    this.versionColumn = builder.versionColumn;
    this.valueColumn = builder.valueColumn;
    this.keyType = builder.keyType;
    this.codec = builder.codec;
    this.retryPolicy = builder.retryPolicy;
    this.clock = builder.clock;
    this.queryTimeout = builder.queryTimeout;
    this.takeTurnAfter = builder.takeTurnAfter;
    this.registry = builder.registry;
    this.instanceName = builder.instanceName;
  }

  /**
   * A builder for a store on {@code table}, starting from the defaults.
   *
   * @param table your table, optionally schema-qualified ({@code "app.accounts"}): lower-case
   *     letters, digits and underscores per part
   * @param keyType the Java type of the key column: {@code String}, {@code Long}, {@code Integer}
   *     or {@code UUID}
   * @param codec how values are stored in the value column, e.g. {@link ValueCodec#longs()}
   * @throws IllegalArgumentException for a table that is not a plain SQL identifier, another key
   *     type, or a null codec
   */
  public static <K, T> Builder<K, T> custom(
      String table, Class<K> keyType, ValueCodec<T, ?> codec) {
    return new Builder<>(table, keyType, codec);
  }

  /** The table, {@code table} or {@code schema.table}. */
  public String table() {
    return table;
  }

  public String keyColumn() {
    return keyColumn;
  }

  public String versionColumn() {
    return versionColumn;
  }

  public String valueColumn() {
    return valueColumn;
  }

  public Class<K> keyType() {
    return keyType;
  }

  public ValueCodec<T, ?> codec() {
    return codec;
  }

  /** How {@code update} retries a lost race when the store owns the transaction. */
  public RetryPolicy retryPolicy() {
    return retryPolicy;
  }

  /** The clock of the retry waits. */
  public LeaseClock clock() {
    return clock;
  }

  /** The JDBC query timeout of each statement, whole seconds. */
  public Duration queryTimeout() {
    return queryTimeout;
  }

  /**
   * How long an {@code update} loses races before it takes its turn on the row; none when it never
   * does (see {@link Builder#takeTurnAfter}).
   */
  public Option<Duration> takeTurnAfter() {
    return Option.of(takeTurnAfter);
  }

  /** The metrics instance name ({@code name} tag); none when metrics are off. */
  public Option<String> instanceName() {
    return Option.of(instanceName);
  }

  MeterRegistry registry() {
    return registry;
  }

  @Override
  public String toString() {
    return "VersionColumnStoreConfig[table="
        + table
        + ", key="
        + keyColumn
        + " ("
        + keyType.getSimpleName()
        + "), version="
        + versionColumn
        + ", value="
        + valueColumn
        + " ("
        + codec
        + "), "
        + retryPolicy
        + ", queryTimeout="
        + queryTimeout
        + ", takeTurnAfter="
        + (takeTurnAfter == null ? "never" : takeTurnAfter)
        + (instanceName == null ? "" : ", metrics=" + instanceName)
        + "]";
  }

  /** Builds a {@link VersionColumnStoreConfig}. */
  public static final class Builder<K, T> {
    private final String table;
    private final Class<K> keyType;
    private final ValueCodec<T, ?> codec;
    private String keyColumn = DEFAULT_KEY_COLUMN;
    private String versionColumn = DEFAULT_VERSION_COLUMN;
    private String valueColumn = DEFAULT_VALUE_COLUMN;
    private RetryPolicy retryPolicy = RetryPolicy.ofDefaults();
    private LeaseClock clock = LeaseClock.system();
    private Duration queryTimeout = DEFAULT_QUERY_TIMEOUT;
    private Duration takeTurnAfter = DEFAULT_TAKE_TURN_AFTER;
    private MeterRegistry registry;
    private String instanceName;

    private Builder(String table, Class<K> keyType, ValueCodec<T, ?> codec) {
      SqlNames.requireSqlIdentifier("table", table);
      if (keyType == null || !KEY_TYPES.contains(keyType)) {
        throw new IllegalArgumentException(
            "The key type "
                + (keyType == null ? "null" : keyType.getName())
                + " is not"
                + " supported: use String, Long, Integer or UUID (matching a text, bigint, int or"
                + " uuid key column).");
      }
      if (codec == null) {
        throw new IllegalArgumentException(
            "The value codec is null: pass ValueCodec.longs(), ValueCodec.strings(),"
                + " ValueCodec.json(...) or ValueCodec.of(...).");
      }
      Codecs.dataType("value codec's stored type", codec.storedType());
      this.table = table;
      this.keyType = keyType;
      this.codec = codec;
    }

    /** The unique key column. Default {@value VersionColumnStoreConfig#DEFAULT_KEY_COLUMN}. */
    public Builder<K, T> keyColumn(String column) {
      this.keyColumn = column("key column", column);
      return this;
    }

    /**
     * The {@code bigint NOT NULL} version column. Default {@value
     * VersionColumnStoreConfig#DEFAULT_VERSION_COLUMN}.
     */
    public Builder<K, T> versionColumn(String column) {
      this.versionColumn = column("version column", column);
      return this;
    }

    /** The value column. Default {@value VersionColumnStoreConfig#DEFAULT_VALUE_COLUMN}. */
    public Builder<K, T> valueColumn(String column) {
      this.valueColumn = column("value column", column);
      return this;
    }

    /**
     * How {@code update} retries a lost race when the store owns the transaction. For a retry
     * bounded by time only: {@code RetryPolicy.custom().maxAttempts(Integer.MAX_VALUE)
     * .maxElapsed(Duration.ofSeconds(30)).build()}. Default {@link RetryPolicy#ofDefaults()}.
     */
    public Builder<K, T> retryPolicy(RetryPolicy retryPolicy) {
      this.retryPolicy =
          required(
              retryPolicy,
              "retryPolicy(null): pass a RetryPolicy, e.g. RetryPolicy.ofDefaults() (the default)");
      return this;
    }

    /** The clock of the retry waits. Default {@link LeaseClock#system()}. */
    public Builder<K, T> clock(LeaseClock clock) {
      this.clock =
          required(clock, "clock(null): pass a LeaseClock, e.g. LeaseClock.system() (the default)");
      return this;
    }

    /**
     * How long one statement may run (waiting for a row lock included) before pgjdbc cancels it and
     * the call fails with {@link dev.nolock.patterns.BackendUnavailableException}; whole seconds,
     * from 1 s to {@link VersionColumnStoreConfig#MAX_QUERY_TIMEOUT}. Default 5 s.
     */
    public Builder<K, T> queryTimeout(Duration queryTimeout) {
      required(
          queryTimeout,
          "queryTimeout(null): pass a Duration, e.g. Duration.ofSeconds(5) (the default)");
      if (queryTimeout.compareTo(Duration.ofSeconds(1)) < 0
          || queryTimeout.compareTo(MAX_QUERY_TIMEOUT) > 0
          || queryTimeout.toNanos() % 1_000_000_000L != 0) {
        throw new IllegalArgumentException(
            "The query timeout must be whole seconds between 1 s and "
                + MAX_QUERY_TIMEOUT
                + " (JDBC counts it in seconds), got "
                + queryTimeout
                + ": use e.g."
                + " Duration.ofSeconds(5).");
      }
      this.queryTimeout = queryTimeout;
      return this;
    }

    /**
     * How long an {@code update} that owns its transactions loses races before each of its next
     * attempts takes its turn on the row: it reads the row with {@code SELECT ... FOR NO KEY
     * UPDATE} in a transaction of its own, applies the change and compares-and-sets, so it waits in
     * PostgreSQL's queue for the row's lock instead of racing the writers that keep winning.
     * Without it, exponential backoff keeps a loser out longer and longer while the winners write
     * on, and on a hot row one writer can lose for seconds.
     *
     * <p>The price, paid only by an update that has lost for this long: its turn holds the row's
     * lock for a round trip and the change function, so the other writers of the row wait for it. A
     * turn whose session sits idle longer than {@link VersionColumnStoreConfig#TURN_IDLE_LIMIT}
     * (the caller paused, or its change function ran long) is ended by PostgreSQL with nothing
     * written, and the others go on; that update races on without turns, as does one whose change
     * function has taken half that limit. From {@code Duration.ZERO} (every update takes its turn
     * at once: a pessimistic store) to {@link VersionColumnStoreConfig#MAX_TAKE_TURN_AFTER}.
     * Default {@link VersionColumnStoreConfig#DEFAULT_TAKE_TURN_AFTER}; {@link #neverTakeTurn()}
     * keeps every update lock-free.
     */
    public Builder<K, T> takeTurnAfter(Duration after) {
      required(
          after,
          "takeTurnAfter(null): pass a Duration, e.g. Duration.ofMillis(20) (the default), or"
              + " call neverTakeTurn()");
      if (after.isNegative() || after.compareTo(MAX_TAKE_TURN_AFTER) > 0) {
        throw new IllegalArgumentException(
            "takeTurnAfter must be between 0 and "
                + MAX_TAKE_TURN_AFTER
                + ", got "
                + after
                + ": use e.g. Duration.ofMillis(20), or neverTakeTurn() for updates that never"
                + " lock the row.");
      }
      this.takeTurnAfter = after;
      return this;
    }

    /**
     * Every {@code update} stays lock-free however long it loses: no writer of the store ever holds
     * the row's lock beyond one statement, and a writer on a hot row can wait through many backoffs
     * (see {@link #takeTurnAfter}).
     */
    public Builder<K, T> neverTakeTurn() {
      this.takeTurnAfter = null;
      return this;
    }

    /**
     * Records attempts, conflicts, retries and give-ups in {@code registry}, tagged {@code
     * component="store"} and {@code name=instanceName}. Default: nothing recorded.
     *
     * @param instanceName names this store (e.g. {@code "accounts"}), never a per-row key
     */
    public Builder<K, T> metrics(MeterRegistry registry, String instanceName) {
      required(
          registry,
          "metrics(null, instanceName): pass the MeterRegistry to record in, or leave metrics"
              + " unset to record nothing");
      Names.requireName(
          "metrics instance name", instanceName, CoordinationMetrics.MAX_INSTANCE_NAME_LENGTH);
      this.registry = registry;
      this.instanceName = instanceName;
      return this;
    }

    /**
     * The config.
     *
     * @throws IllegalArgumentException when two of the key, version and value columns are the same
     */
    public VersionColumnStoreConfig<K, T> build() {
      if (keyColumn.equals(versionColumn)
          || keyColumn.equals(valueColumn)
          || versionColumn.equals(valueColumn)) {
        throw new IllegalArgumentException(
            "The key, version and value columns must be three different columns, got key="
                + keyColumn
                + ", version="
                + versionColumn
                + ", value="
                + valueColumn
                + ".");
      }
      return new VersionColumnStoreConfig<>(this);
    }

    private static String column(String what, String column) {
      Name name = SqlNames.requireSqlIdentifier(what, column);
      if (name.qualified()) {
        throw new IllegalArgumentException(
            "The "
                + what
                + " \""
                + column
                + "\" is qualified: name the column alone (the table"
                + " is configured separately).");
      }
      return column;
    }

    private static <T> T required(T value, String howToFix) {
      if (value == null) {
        throw new IllegalArgumentException(howToFix);
      }
      return value;
    }
  }
}
