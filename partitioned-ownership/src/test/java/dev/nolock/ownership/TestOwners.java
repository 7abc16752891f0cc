package dev.nolock.ownership;

import java.time.Duration;

/** The settings every owner in the tests runs with: short timeouts, so rebalances take seconds. */
final class TestOwners {

  /** Within the broker's group.min.session.timeout.ms (1 s), long enough for 2 busy cores. */
  static final Duration SESSION_TIMEOUT = Duration.ofSeconds(4);

  private TestOwners() {}

  static OwnershipConfig.Builder config(
      String bootstrap, String topic, String group, String ownerId) {
    return OwnershipConfig.custom(bootstrap, topic, group)
        .ownerId(ownerId)
        .sessionTimeout(SESSION_TIMEOUT)
        .safetyMargin(Duration.ofSeconds(1))
        .maxPollInterval(Duration.ofSeconds(30))
        .pollTimeout(Duration.ofMillis(200))
        .maxPollRecords(100)
        .commitInterval(Duration.ofSeconds(1))
        .retryBackoff(Duration.ofMillis(50), Duration.ofSeconds(1))
        .closeTimeout(Duration.ofSeconds(10))
        .consumerProperty("client.id", "owner-" + ownerId);
  }
}
