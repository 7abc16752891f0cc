package dev.nolock.spring.internal;

import java.util.Map;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import org.springframework.boot.health.contributor.CompositeHealthContributor;
import org.springframework.boot.health.contributor.Health;
import org.springframework.boot.health.contributor.HealthContributor;
import org.springframework.boot.health.contributor.HealthIndicator;

/**
 * Health of each declared election, one indicator per election under {@code nolockElections}.
 *
 * <ol>
 *   <li>The election's state is read from {@link Elections#states()}, which asks the backend for
 *       the lease's holder.
 *   <li>DOWN when its elector is not running (never started, or closed) or the backend could not be
 *       read; the backend's error is in the details.
 *   <li>UP otherwise, whether or not this instance leads: following is healthy.
 * </ol>
 */
public final class ElectionsHealth implements CompositeHealthContributor {

  private final Elections elections;

  public ElectionsHealth(Elections elections) {
    this.elections = elections;
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
    return elections.names().stream()
        .collect(
            Collectors.toMap(
                name -> name,
                name -> (HealthIndicator) () -> health(name),
                (a, b) -> a,
                java.util.LinkedHashMap::new));
  }

  private Health health(String name) {
    Elections.State state = elections.state(name);
    Health.Builder b =
        state.running() && state.backendError() == null ? Health.up() : Health.down();
    b.withDetail("running", state.running()).withDetail("leader", state.leader());
    if (state.backendError() != null) {
      b.withDetail("backendError", state.backendError());
    }
    return b.build();
  }
}
