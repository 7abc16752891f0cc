package dev.nolock.lock.dynamodb;

import dev.nolock.dynamodb.DynamoDbNames;
import dev.nolock.patterns.LeaseClock;

/**
 * Immutable settings of a {@link DynamoDbLockBackend}, built with {@link #custom()}; each setter
 * validates at once.
 *
 * <p>Defaults: table {@value #DEFAULT_TABLE}, partition key attribute {@value
 * #DEFAULT_KEY_ATTRIBUTE} (a string holding the lock name), the system {@link LeaseClock}.
 */
public final class DynamoDbLockBackendConfig {

  public static final String DEFAULT_TABLE = "nolock_locks";
  public static final String DEFAULT_KEY_ATTRIBUTE = "lock_name";

  private static final DynamoDbLockBackendConfig DEFAULTS = custom().build();

  private final String tableName;
  private final String keyAttribute;
  private final LeaseClock clock;

  private DynamoDbLockBackendConfig(Builder b) {
    this.tableName = b.tableName;
    this.keyAttribute = b.keyAttribute;
    this.clock = b.clock;
    if (DynamoDbLockBackend.ITEM_ATTRIBUTES.contains(keyAttribute)) {
      throw new IllegalArgumentException(
          "The key attribute \""
              + keyAttribute
              + "\" collides with an attribute of the lease item "
              + DynamoDbLockBackend.ITEM_ATTRIBUTES
              + ": pick another name, e.g. \""
              + DEFAULT_KEY_ATTRIBUTE
              + "\".");
    }
  }

  /** Every default. */
  public static DynamoDbLockBackendConfig ofDefaults() {
    return DEFAULTS;
  }

  /** A builder that starts from the defaults. */
  public static Builder custom() {
    return new Builder();
  }

  public String tableName() {
    return tableName;
  }

  /** The table's partition key: a string attribute holding the lock name. */
  public String keyAttribute() {
    return keyAttribute;
  }

  /**
   * The monotonic clock on which this backend measures how long it has watched another holder's
   * lease, and its own holders' deadlines. Give the {@code FencedLock} on this backend the same
   * clock.
   */
  public LeaseClock clock() {
    return clock;
  }

  @Override
  public String toString() {
    return "DynamoDbLockBackendConfig[table=" + tableName + ", key=" + keyAttribute + "]";
  }

  /** Builds a {@link DynamoDbLockBackendConfig}. */
  public static final class Builder {
    private String tableName = DEFAULT_TABLE;
    private String keyAttribute = DEFAULT_KEY_ATTRIBUTE;
    private LeaseClock clock = LeaseClock.system();

    private Builder() {}

    /** The lease table: 3 to 255 characters of {@code [a-zA-Z0-9_.-]}. */
    public Builder tableName(String tableName) {
      this.tableName = DynamoDbNames.requireTableName(tableName);
      return this;
    }

    /** The table's partition key attribute (a string), default {@value #DEFAULT_KEY_ATTRIBUTE}. */
    public Builder keyAttribute(String keyAttribute) {
      this.keyAttribute = DynamoDbNames.requireAttributeName("key attribute", keyAttribute);
      return this;
    }

    /** The monotonic clock; a {@code ManualLeaseClock} in tests. */
    public Builder clock(LeaseClock clock) {
      this.clock = present(clock, "clock");
      return this;
    }

    public DynamoDbLockBackendConfig build() {
      return new DynamoDbLockBackendConfig(this);
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
