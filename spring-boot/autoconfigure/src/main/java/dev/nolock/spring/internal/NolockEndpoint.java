package dev.nolock.spring.internal;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.springframework.boot.actuate.endpoint.annotation.Endpoint;
import org.springframework.boot.actuate.endpoint.annotation.ReadOperation;

/**
 * The {@code nolock} Actuator endpoint: what this instance holds and sees, one section per {@link
 * NolockSection} bean. Like Actuator's other endpoints it is not exposed over HTTP until the
 * application lists it in {@code management.endpoints.web.exposure.include}.
 *
 * <ol>
 *   <li>The sections are read in their bean order, each at the time of the request.
 *   <li>Each section's report goes under its name; no section sees another.
 * </ol>
 */
@Endpoint(id = "nolock")
public final class NolockEndpoint {

  private final List<NolockSection> sections;

  public NolockEndpoint(List<NolockSection> sections) {
    this.sections = List.copyOf(sections);
  }

  /** Every section's report, by section name. */
  @ReadOperation
  public Map<String, Object> report() {
    Map<String, Object> report = new LinkedHashMap<>();
    for (NolockSection section : sections) {
      report.put(section.name(), section.report());
    }
    return report;
  }
}
