package dev.nolock.spring.internal;

import dev.nolock.spring.PartitionOwners;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Stream;
import org.springframework.boot.health.contributor.CompositeHealthContributor;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthContributor;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * Health of each declared partition owner, one indicator per owner under {@code nolockOwners}.
 *
 * <ol>
 *   <li>The owner's state is read as the {@code owners} section of the endpoint reads it.
 *   <li>DOWN when it is not running: it stopped on its own ({@code failure} names the exception's
 *       class; its message is left out because it can quote a record), or it is not started.
 *   <li>UP otherwise, with the partitions it owns and their epochs; owning none is healthy (the
 *       group may have more members than the topic has partitions).
 * </ol>
 */
public final class OwnersHealth implements CompositeHealthContributor {

  private final PartitionOwners owners;

  public OwnersHealth(PartitionOwners owners) {
    this.owners = owners;
  }

  @Override
  public HealthContributor getContributor(String name) {
    return indicators().get(name);
  }

  @Override
  public Stream<Entry> stream() {
    return indicators().entrySet().stream().map(e -> new Entry(e.getKey(), e.getValue()));
  }

  private Map<String, HealthIndicator> indicators() {
    Map<String, HealthIndicator> indicators = new LinkedHashMap<>();
    for (String name : owners.names()) {
      indicators.put(name, () -> health(name));
    }
    return indicators;
  }

  private Health health(String name) {
    OwnersSection.Owner state = OwnersSection.state(owners, name);
    Health.Builder b = state.running() ? Health.up() : Health.down();
    b.withDetail("running", state.running()).withDetail("partitions", state.partitions());
    if (state.failure() != null) {
      b.withDetail("failure", state.failure());
    }
    return b.build();
  }
}
