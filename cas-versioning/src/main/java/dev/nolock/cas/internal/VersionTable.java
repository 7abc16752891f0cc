package dev.nolock.cas.internal;

import static org.jooq.impl.DSL.cast;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;
import static org.jooq.impl.DSL.val;

import dev.nolock.cas.ValueCodec;
import dev.nolock.cas.VersionColumnStoreConfig;
import dev.nolock.cas.VersionedWrite;
import dev.nolock.patterns.Version;
import dev.nolock.patterns.Versioned;
import dev.nolock.patterns.sql.SqlNames;
import io.vavr.control.Option;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.jooq.DSLContext;
import org.jooq.DataType;
import org.jooq.Field;
import org.jooq.Name;
import org.jooq.Record2;
import org.jooq.Record3;
import org.jooq.RowN;
import org.jooq.SQLDialect;
import org.jooq.Table;
import org.jooq.conf.RenderKeywordCase;
import org.jooq.conf.RenderQuotedNames;
import org.jooq.conf.Settings;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * The user's table and the statements on it, built with jOOQ's typed DSL: identifiers come from
 * validated configuration and are rendered as quoted names, every value is bound. Each method runs
 * its statements on the context it is given; transactions are the caller's business.
 *
 * @param <K> the key type
 * @param <T> the value type
 * @param <S> the type the value is stored as
 */
public final class VersionTable<K, T, S> {

  private static final String TARGET = "nolock_t";
  private static final String SOURCE = "nolock_v";
  private static final Field<Long> ONE = inline(1L);

  /**
   * A row's first version is drawn uniformly from {@code [2^32, 2^62)}, so a key deleted and
   * inserted again does not start again where its old row started (the ABA hazard: a writer holding
   * a version of the old row would pass the check against the new one). Within a row's life the
   * version counts up by one. Two lives of a key can share a version only if their ranges overlap:
   * with {@code n} changes in the two lives together, probability about {@code n / 2^62} per
   * insert. The range starts at 2^32 so that rows that started at 1 (inserted by your own {@code
   * INSERT} with {@code DEFAULT 1}, or by earlier releases of this store) meet no drawn version
   * unless they change four billion times, and ends at 2^62 so that a row can change 2^62 more
   * times before {@code bigint} runs out. {@link SecureRandom}, not a per-thread generator, so that
   * processes started at the same moment do not draw alike.
   */
  private static final long FIRST_VERSION_ORIGIN = 1L << 32;

  private static final long FIRST_VERSION_BOUND = 1L << 62;
  private static final SecureRandom FIRST_VERSIONS = new SecureRandom();

  private final String tableName;
  private final String keyColumn;
  private final String versionColumn;
  private final String valueColumn;
  private final Table<?> table;
  private final Table<?> target;
  private final Field<K> key;
  private final Field<Long> version;
  private final Field<S> value;
  private final Field<K> targetKey;
  private final Field<Long> targetVersion;
  private final ValueCodec<T, S> codec;
  private final int queryTimeoutSeconds;

  private VersionTable(VersionColumnStoreConfig<K, T> config, ValueCodec<T, S> codec) {
    Name name = SqlNames.requireSqlIdentifier("table", config.table());
    DataType<K> keyType = Codecs.dataType("key type", config.keyType());
    DataType<S> valueType = Codecs.dataType("value codec's stored type", codec.storedType());
    this.tableName = config.table();
    this.keyColumn = config.keyColumn();
    this.versionColumn = config.versionColumn();
    this.valueColumn = config.valueColumn();
    this.table = table(name);
    this.target = table.as(TARGET);
    this.key = field(name(keyColumn), keyType);
    this.version = field(name(versionColumn), SQLDataType.BIGINT);
    this.value = field(name(valueColumn), valueType);
    this.targetKey = field(name(TARGET, keyColumn), keyType);
    this.targetVersion = field(name(TARGET, versionColumn), SQLDataType.BIGINT);
    this.codec = codec;
    this.queryTimeoutSeconds = Math.toIntExact(config.queryTimeout().toSeconds());
  }

  /** The table of {@code config}. */
  public static <K, T> VersionTable<K, T, ?> of(VersionColumnStoreConfig<K, T> config) {
    return create(config, config.codec());
  }

  private static <K, T, S> VersionTable<K, T, S> create(
      VersionColumnStoreConfig<K, T> config, ValueCodec<T, S> codec) {
    return new VersionTable<>(config, codec);
  }

  /** {@code SELECT value, version FROM t WHERE key = :id}. */
  public Option<Versioned<T>> read(DSLContext dsl, K id) {
    List<Record2<S, Long>> rows =
        dsl.select(value, version)
            .from(table)
            .where(key.eq(val(id, key)))
            .queryTimeout(queryTimeoutSeconds)
            .fetch();
    if (rows.size() > 1) {
      throw notUnique(rows.size(), id, "read");
    }
    return Option.ofOptional(rows.stream().findFirst())
        .map(row -> new Versioned<>(decode(row.value1(), id), version(row.value2(), id)));
  }

  /**
   * {@code SELECT value, version, set_config('idle_in_transaction_session_timeout', :idle, true)
   * FROM t WHERE key = :id FOR NO KEY UPDATE}: waits in PostgreSQL's queue for the row's lock and
   * reads the row, and bounds how long this transaction may then sit idle holding it: past {@code
   * idleLimit} between two statements PostgreSQL ends the session (the setting is the transaction's
   * own, gone at its end, so a pooled session keeps its own).
   */
  public Option<Versioned<T>> readForTurn(DSLContext dsl, K id, Duration idleLimit) {
    List<Record3<S, Long, String>> rows =
        dsl.select(
                value,
                version,
                function(
                    "set_config",
                    SQLDataType.VARCHAR,
                    inline("idle_in_transaction_session_timeout"),
                    val(Long.toString(idleLimit.toMillis())),
                    inline(true)))
            .from(table)
            .where(key.eq(val(id, key)))
            .forNoKeyUpdate()
            .queryTimeout(queryTimeoutSeconds)
            .fetch();
    if (rows.size() > 1) {
      throw notUnique(rows.size(), id, "read for its turn");
    }
    return Option.ofOptional(rows.stream().findFirst())
        .map(row -> new Versioned<>(decode(row.value1(), id), version(row.value2(), id)));
  }

  /** {@code SELECT version FROM t WHERE key = :id}. */
  public Option<Version> currentVersion(DSLContext dsl, K id) {
    List<Long> versions =
        dsl.select(version)
            .from(table)
            .where(key.eq(val(id, key)))
            .queryTimeout(queryTimeoutSeconds)
            .fetch(version);
    if (versions.size() > 1) {
      throw notUnique(versions.size(), id, "read");
    }
    return Option.ofOptional(versions.stream().findFirst()).map(v -> version(v, id));
  }

  /**
   * {@code INSERT INTO t (key, version, value) VALUES (:id, :first, :value) ON CONFLICT (key) DO
   * NOTHING RETURNING version}, {@code :first} drawn at random from {@code [2^32, 2^62)} (why: see
   * {@code FIRST_VERSION_ORIGIN}): the new version, or none when the key exists.
   */
  public Option<Version> insert(DSLContext dsl, K id, T newValue) {
    long first = FIRST_VERSIONS.nextLong(FIRST_VERSION_ORIGIN, FIRST_VERSION_BOUND);
    return Option.ofOptional(
            dsl.insertInto(table, key, version, value)
                .values(val(id, key), val(first), val(encode(newValue), value))
                .onConflict(key)
                .doNothing()
                .returningResult(version)
                .queryTimeout(queryTimeoutSeconds)
                .fetchOptional(version))
        .map(v -> version(v, id));
  }

  /**
   * {@code UPDATE t SET value = :value, version = version + 1 WHERE key = :id AND version =
   * :expected RETURNING version}: the new version, none when the row is not at {@code expected}.
   *
   * @throws IllegalStateException when more than one row matched (the key is not unique)
   */
  public Option<Version> compareAndSet(DSLContext dsl, K id, long expected, T newValue) {
    List<Long> versions =
        dsl.update(table)
            .set(value, val(encode(newValue), value))
            .set(version, version.plus(ONE))
            .where(key.eq(val(id, key)))
            .and(version.eq(val(expected)))
            .returningResult(version)
            .queryTimeout(queryTimeoutSeconds)
            .fetch(version);
    if (versions.size() > 1) {
      throw notUnique(versions.size(), id, "compare-and-set");
    }
    return Option.ofOptional(versions.stream().findFirst()).map(v -> version(v, id));
  }

  /**
   * {@code DELETE FROM t WHERE key = :id AND version = :expected}: true when deleted.
   *
   * @throws IllegalStateException when more than one row matched (the key is not unique)
   */
  public boolean delete(DSLContext dsl, K id, long expected) {
    int rows =
        dsl.deleteFrom(table)
            .where(key.eq(val(id, key)))
            .and(version.eq(val(expected)))
            .queryTimeout(queryTimeoutSeconds)
            .execute();
    if (rows > 1) {
      throw notUnique(rows, id, "delete");
    }
    return rows == 1;
  }

  /**
   * {@code SELECT t.key, t.version FROM t WHERE t.key IN (:ids) ORDER BY t.key FOR UPDATE}: the
   * current versions of the rows that exist, each row locked until the transaction ends. The rows
   * are locked in key order, so two batches over overlapping keys cannot deadlock each other.
   */
  public Map<K, Version> lockVersions(DSLContext dsl, Collection<K> ids) {
    List<Record2<K, Long>> rows =
        dsl.select(targetKey, targetVersion)
            .from(target)
            .where(targetKey.in(ids))
            .orderBy(targetKey)
            .forUpdate()
            .queryTimeout(queryTimeoutSeconds)
            .fetch();
    Map<K, Version> versions = new HashMap<>();
    for (Record2<K, Long> row : rows) {
      if (versions.put(row.value1(), version(row.value2(), row.value1())) != null) {
        throw notUnique(2, row.value1(), "batch compare-and-set");
      }
    }
    return versions;
  }

  /**
   * One statement for many rows: {@code UPDATE t AS nolock_t SET value = nolock_v.value, version =
   * nolock_t.version + 1 FROM (VALUES (:id, :expected, :value), ...) AS nolock_v (id, expected,
   * value) WHERE nolock_t.key = nolock_v.id AND nolock_t.version = nolock_v.expected RETURNING
   * nolock_t.key, nolock_t.version}. The VALUES binds are cast to the columns' types, since
   * PostgreSQL cannot infer a type for a parameter in a VALUES list. Every column reference except
   * the SET targets (which PostgreSQL wants bare) is qualified, so a user column named like a
   * VALUES column cannot be ambiguous.
   *
   * @param writes writes with distinct keys
   * @return the new version of each row that was at its expected version
   */
  public Map<K, Version> compareAndSetAll(DSLContext dsl, List<VersionedWrite<K, T>> writes) {
    List<RowN> rows = new ArrayList<>(writes.size());
    for (VersionedWrite<K, T> write : writes) {
      rows.add(
          DSL.row(
              List.of(
                  cast(val(write.id(), key), key.getDataType()),
                  cast(val(write.expected().asLong()), SQLDataType.BIGINT),
                  cast(val(encode(write.newValue()), value), value.getDataType()))));
    }
    Table<?> source = DSL.values(rows.toArray(RowN[]::new)).as(SOURCE, "id", "expected", "value");
    Field<K> sourceKey = field(name(SOURCE, "id"), key.getDataType());
    Field<Long> sourceExpected = field(name(SOURCE, "expected"), SQLDataType.BIGINT);
    Field<S> sourceValue = field(name(SOURCE, "value"), value.getDataType());
    List<Record2<K, Long>> updated =
        dsl.update(target)
            .set(value, sourceValue)
            .set(version, targetVersion.plus(ONE))
            .from(source)
            .where(targetKey.eq(sourceKey))
            .and(targetVersion.eq(sourceExpected))
            .returningResult(targetKey, targetVersion)
            .queryTimeout(queryTimeoutSeconds)
            .fetch();
    Map<K, Version> versions = new HashMap<>();
    for (Record2<K, Long> row : updated) {
      if (versions.put(row.value1(), version(row.value2(), row.value1())) != null) {
        throw notUnique(2, row.value1(), "batch compare-and-set");
      }
    }
    return versions;
  }

  /** The table as configured, for messages. */
  public String tableName() {
    return tableName;
  }

  /** {@code CREATE TABLE} for this configuration, for messages and the README. */
  public String createTableSql() {
    return ddl()
        .createTable(table)
        .column(key, key.getDataType().nullable(false))
        .column(version, SQLDataType.BIGINT.nullable(false))
        .column(value, value.getDataType().nullable(false))
        .primaryKey(key)
        .getSQL();
  }

  /** {@code ALTER TABLE ... ADD COLUMN version bigint NOT NULL DEFAULT 1}, for messages. */
  public String addVersionColumnSql() {
    return ddl()
        .alterTable(table)
        .addColumn(version, SQLDataType.BIGINT.nullable(false).defaultValue(ONE))
        .getSQL();
  }

  /** Names the columns, for messages. */
  public String describeColumns() {
    return "key " + keyColumn + ", version " + versionColumn + ", value " + valueColumn;
  }

  /** The exception for a statement that matched several rows of one key. */
  public IllegalStateException notUnique(int rows, Object id, String doing) {
    boolean wrote = !doing.equals("read");
    return new IllegalStateException(
        "A "
            + doing
            + " matched "
            + rows
            + " rows for key "
            + id
            + " in table "
            + tableName
            + ": the key column "
            + keyColumn
            + " is not unique."
            + (wrote
                ? " On an autocommit connection (the store's own single-row writes) that change is"
                    + " committed already; in a transaction (a batch, a pool with autocommit off,"
                    + " or yours) it is rolled back, or must be."
                : "")
            + " Give the table a primary key or a unique index on "
            + keyColumn
            + " alone, e.g."
            + " ALTER TABLE "
            + tableName
            + " ADD PRIMARY KEY ("
            + keyColumn
            + ").");
  }

  private S encode(T newValue) {
    S stored = codec.encode(newValue);
    if (stored == null) {
      throw new IllegalArgumentException(
          "The value codec "
              + codec
              + " encoded "
              + newValue
              + " as null: a codec must encode"
              + " every value to a non-null column value.");
    }
    return stored;
  }

  private T decode(S stored, Object id) {
    if (stored == null) {
      throw new IllegalStateException(
          "The value column "
              + valueColumn
              + " of table "
              + tableName
              + " holds NULL for key "
              + id
              + ": this store writes no NULLs; declare the column NOT NULL and fix the row.");
    }
    T decoded = codec.decode(stored);
    if (decoded == null) {
      throw new IllegalStateException(
          "The value codec "
              + codec
              + " decoded the value of key "
              + id
              + " to null: a codec"
              + " must decode every column value it wrote.");
    }
    return decoded;
  }

  private Version version(Long stored, Object id) {
    if (stored == null) {
      throw new IllegalStateException(
          "The version column "
              + versionColumn
              + " of table "
              + tableName
              + " holds NULL for key"
              + " "
              + id
              + ": declare it bigint NOT NULL ("
              + addVersionColumnSql()
              + ").");
    }
    return Version.of(stored);
  }

  private static DSLContext ddl() {
    return DSL.using(
        SQLDialect.POSTGRES,
        new Settings()
            .withRenderQuotedNames(RenderQuotedNames.EXPLICIT_DEFAULT_UNQUOTED)
            .withRenderKeywordCase(RenderKeywordCase.UPPER));
  }

  @Override
  public String toString() {
    return tableName;
  }
}
