package dev.nolock.dynamodb;

import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.search.RequiredSearch;

/** The store's counters as read back from a registry. */
record Meters(long attempts, long conflicts, long retries, long giveUps) {

  static Meters of(MeterRegistry registry) {
    return new Meters(
        count(registry.get(DynamoDbVersionedStore.ATTEMPTS)),
        count(registry.get("nolock.conflicts")),
        count(registry.get(DynamoDbVersionedStore.RETRIES)),
        count(registry.get(DynamoDbVersionedStore.GIVE_UPS)));
  }

  private static long count(RequiredSearch search) {
    return (long) search.counter().count();
  }

  @Override
  public String toString() {
    return "attempts="
        + attempts
        + " conflicts="
        + conflicts
        + " retries="
        + retries
        + " give-ups="
        + giveUps;
  }
}
