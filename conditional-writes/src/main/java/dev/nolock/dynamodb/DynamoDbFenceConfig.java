package dev.nolock.dynamodb;

import dev.nolock.patterns.CoordinationMetrics;
import io.micrometer.core.instrument.MeterRegistry;

/**
 * Immutable settings of a {@link DynamoDbFence}, built with {@link #custom(String)}; each setter
 * validates at once.
 *
 * <p>The fence lives in two attributes of each guarded item: {@value #DEFAULT_TOKEN_ATTRIBUTE} (a
 * number, the highest token that wrote the item) and {@value #DEFAULT_OWNER_ATTRIBUTE} (a string,
 * who wrote with it), unless renamed.
 */
public final class DynamoDbFenceConfig {

  public static final String DEFAULT_TOKEN_ATTRIBUTE = "fence_token";
  public static final String DEFAULT_OWNER_ATTRIBUTE = "fence_owner";

  private final String tableName;
  private final String tokenAttribute;
  private final String ownerAttribute;
  private final CoordinationMetrics metrics;

  private DynamoDbFenceConfig(Builder b) {
    this.tableName = b.tableName;
    this.tokenAttribute = b.tokenAttribute;
    this.ownerAttribute = b.ownerAttribute;
    this.metrics = b.metrics;
    if (tokenAttribute.equals(ownerAttribute)) {
      throw new IllegalArgumentException(
          "The token and owner attributes must differ, both are \"" + tokenAttribute + "\".");
    }
  }

  /** A builder for a fence on the items of {@code tableName}. */
  public static Builder custom(String tableName) {
    return new Builder(tableName);
  }

  public String tableName() {
    return tableName;
  }

  /** The number attribute holding the highest token that wrote the item. */
  public String tokenAttribute() {
    return tokenAttribute;
  }

  /** The string attribute holding the owner that wrote with that token. */
  public String ownerAttribute() {
    return ownerAttribute;
  }

  /** Where rejections are counted. */
  public CoordinationMetrics metrics() {
    return metrics;
  }

  @Override
  public String toString() {
    return "DynamoDbFenceConfig[table="
        + tableName
        + ", token="
        + tokenAttribute
        + ", owner="
        + ownerAttribute
        + "]";
  }

  /** Builds a {@link DynamoDbFenceConfig}. */
  public static final class Builder {
    private final String tableName;
    private String tokenAttribute = DEFAULT_TOKEN_ATTRIBUTE;
    private String ownerAttribute = DEFAULT_OWNER_ATTRIBUTE;
    private CoordinationMetrics metrics = CoordinationMetrics.noop();

    private Builder(String tableName) {
      this.tableName = DynamoDbNames.requireTableName(tableName);
    }

    /** The token attribute, default {@value DynamoDbFenceConfig#DEFAULT_TOKEN_ATTRIBUTE}. */
    public Builder tokenAttribute(String name) {
      this.tokenAttribute = DynamoDbNames.requireAttributeName("fence token attribute", name);
      return this;
    }

    /** The owner attribute, default {@value DynamoDbFenceConfig#DEFAULT_OWNER_ATTRIBUTE}. */
    public Builder ownerAttribute(String name) {
      this.ownerAttribute = DynamoDbNames.requireAttributeName("fence owner attribute", name);
      return this;
    }

    /**
     * Counts rejections ({@code nolock.fence.rejections}) in {@code registry}, tagged {@code
     * component="fence"} and {@code name=instanceName} (one configured name per fence, never a
     * per-write key, at most {@value CoordinationMetrics#MAX_INSTANCE_NAME_LENGTH} characters);
     * default: nowhere.
     */
    public Builder metrics(MeterRegistry registry, String instanceName) {
      this.metrics = CoordinationMetrics.of(registry, "fence", instanceName);
      return this;
    }

    public DynamoDbFenceConfig build() {
      return new DynamoDbFenceConfig(this);
    }
  }
}
