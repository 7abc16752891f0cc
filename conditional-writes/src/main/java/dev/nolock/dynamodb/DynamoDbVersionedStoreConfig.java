package dev.nolock.dynamodb;

import dev.nolock.patterns.CoordinationMetrics;
import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.Names;
import dev.nolock.patterns.RetryPolicy;
import io.micrometer.core.instrument.MeterRegistry;
import io.vavr.control.Option;

/**
 * Immutable settings of a {@link DynamoDbVersionedStore}, built with {@link #custom(String,
 * AttributeCodec)}; each setter validates at once.
 *
 * <p>Defaults: key attribute {@value #DEFAULT_KEY_ATTRIBUTE}, value attribute {@value
 * #DEFAULT_VALUE_ATTRIBUTE}, version attribute {@value #DEFAULT_VERSION_ATTRIBUTE}, {@link
 * RetryPolicy#ofDefaults()} for {@code update}, the system {@link LeaseClock} for its backoff, and
 * no metrics.
 *
 * @param <T> the value type
 */
public final class DynamoDbVersionedStoreConfig<T> {

  public static final String DEFAULT_KEY_ATTRIBUTE = "pk";
  public static final String DEFAULT_VALUE_ATTRIBUTE = "value";
  public static final String DEFAULT_VERSION_ATTRIBUTE = "rvn";

  private final String tableName;
  private final AttributeCodec<T> codec;
  private final String keyAttribute;
  private final String valueAttribute;
  private final String versionAttribute;
  private final RetryPolicy retryPolicy;
  private final LeaseClock clock;
  private final MeterRegistry registry;
  private final String instanceName;

  private DynamoDbVersionedStoreConfig(Builder<T> b) {
    this.tableName = b.tableName;
    this.codec = b.codec;
    this.keyAttribute = b.keyAttribute;
    this.valueAttribute = b.valueAttribute;
    this.versionAttribute = b.versionAttribute;
    this.retryPolicy = b.retryPolicy;
    this.clock = b.clock;
    this.registry = b.registry;
    this.instanceName =
        b.instanceName != null
            ? b.instanceName
            : tableName.substring(
                0, Math.min(tableName.length(), CoordinationMetrics.MAX_INSTANCE_NAME_LENGTH));
    if (keyAttribute.equals(valueAttribute)
        || keyAttribute.equals(versionAttribute)
        || valueAttribute.equals(versionAttribute)) {
      throw new IllegalArgumentException(
          "The key, value and version attributes must be three different attributes, got key=\""
              + keyAttribute
              + "\", value=\""
              + valueAttribute
              + "\", version=\""
              + versionAttribute
              + "\".");
    }
  }

  /**
   * A builder for a store on {@code tableName} (3 to 255 characters of {@code [a-zA-Z0-9_.-]})
   * whose values {@code codec} stores, e.g. {@link AttributeCodec#longs()}.
   */
  public static <T> Builder<T> custom(String tableName, AttributeCodec<T> codec) {
    return new Builder<>(tableName, codec);
  }

  public String tableName() {
    return tableName;
  }

  public AttributeCodec<T> codec() {
    return codec;
  }

  /** The table's partition key: a string attribute holding the item id. */
  public String keyAttribute() {
    return keyAttribute;
  }

  /** The attribute that holds the value. */
  public String valueAttribute() {
    return valueAttribute;
  }

  /** The attribute that holds the record version number (a UUID string). */
  public String versionAttribute() {
    return versionAttribute;
  }

  /** How {@code update} retries a lost race. */
  public RetryPolicy retryPolicy() {
    return retryPolicy;
  }

  /** The clock {@code update} measures and waits its backoff on. */
  public LeaseClock clock() {
    return clock;
  }

  /** Where the metrics go, from {@link Builder#metrics}; none without it (nothing recorded). */
  public Option<MeterRegistry> registry() {
    return Option.of(registry);
  }

  /** The {@code name} tag of every meter; unless set, the table name (its first 100 characters). */
  public String instanceName() {
    return instanceName;
  }

  @Override
  public String toString() {
    return "DynamoDbVersionedStoreConfig[table="
        + tableName
        + ", key="
        + keyAttribute
        + ", value="
        + valueAttribute
        + ", version="
        + versionAttribute
        + ", codec="
        + codec
        + ", "
        + retryPolicy
        + "]";
  }

  /** Builds a {@link DynamoDbVersionedStoreConfig}. */
  public static final class Builder<T> {
    private final String tableName;
    private final AttributeCodec<T> codec;
    private String keyAttribute = DEFAULT_KEY_ATTRIBUTE;
    private String valueAttribute = DEFAULT_VALUE_ATTRIBUTE;
    private String versionAttribute = DEFAULT_VERSION_ATTRIBUTE;
    private RetryPolicy retryPolicy = RetryPolicy.ofDefaults();
    private LeaseClock clock = LeaseClock.system();
    private MeterRegistry registry;
    private String instanceName;

    private Builder(String tableName, AttributeCodec<T> codec) {
      this.tableName = DynamoDbNames.requireTableName(tableName);
      if (codec == null) {
        throw new IllegalArgumentException(
            "The codec is null: pass how the stored value is written, e.g."
                + " AttributeCodec.longs().");
      }
      this.codec = codec;
    }

    /**
     * The table's partition key attribute (a string), default {@value
     * DynamoDbVersionedStoreConfig#DEFAULT_KEY_ATTRIBUTE}.
     */
    public Builder<T> keyAttribute(String name) {
      this.keyAttribute = DynamoDbNames.requireAttributeName("key attribute", name);
      return this;
    }

    /**
     * The attribute that holds the value, default {@value
     * DynamoDbVersionedStoreConfig#DEFAULT_VALUE_ATTRIBUTE}. Reserved words are fine.
     */
    public Builder<T> valueAttribute(String name) {
      this.valueAttribute = DynamoDbNames.requireAttributeName("value attribute", name);
      return this;
    }

    /**
     * The attribute that holds the rvn, default {@value
     * DynamoDbVersionedStoreConfig#DEFAULT_VERSION_ATTRIBUTE}.
     */
    public Builder<T> versionAttribute(String name) {
      this.versionAttribute = DynamoDbNames.requireAttributeName("version attribute", name);
      return this;
    }

    /**
     * How {@code update} retries a lost race, default {@link RetryPolicy#ofDefaults()} (10 attempts
     * within 10 s). For a hot item give it room: {@code RetryPolicy.custom().maxAttempts(100)}.
     */
    public Builder<T> retryPolicy(RetryPolicy retryPolicy) {
      this.retryPolicy = present(retryPolicy, "retryPolicy");
      return this;
    }

    /** The clock for {@code update}'s backoff; a {@code ManualLeaseClock} in tests. */
    public Builder<T> clock(LeaseClock clock) {
      this.clock = present(clock, "clock");
      return this;
    }

    /**
     * Records metrics in {@code registry} under {@code component=store, name=instanceName}: one
     * configured name per store, never an item id.
     */
    public Builder<T> metrics(MeterRegistry registry, String instanceName) {
      this.registry = present(registry, "registry");
      this.instanceName =
          Names.requireName(
              "metrics instance name", instanceName, CoordinationMetrics.MAX_INSTANCE_NAME_LENGTH);
      return this;
    }

    public DynamoDbVersionedStoreConfig<T> build() {
      return new DynamoDbVersionedStoreConfig<>(this);
    }
  }

  /**
   * {@code value}, or an {@link IllegalArgumentException} naming the setting: a configuration error
   * is the caller's to fix, never a {@link NullPointerException}.
   */
  private static <V> V present(V value, String what) {
    if (value == null) {
      throw new IllegalArgumentException(
          "The " + what + " is null: pass a value, or leave the setting out to keep its default.");
    }
    return value;
  }
}
