package dev.nolock.spring.autoconfigure;

import org.springframework.boot.context.properties.ConfigurationProperties;

/** The SQL fence, under {@code nolock.fence.*}; see {@link NolockFenceAutoConfiguration}. */
@ConfigurationProperties("nolock.fence")
public class NolockFenceProperties {

  /**
   * The fence table, optionally {@code schema.table}; its write ids go to the table of the same
   * name with {@code _writes} appended.
   */
  private String table = "nolock_fences";

  /** The {@code name} tag of the fence's metrics. */
  private String metricsName = "default";

  public String getTable() {
    return table;
  }

  public void setTable(String table) {
    this.table = table;
  }

  public String getMetricsName() {
    return metricsName;
  }

  public void setMetricsName(String metricsName) {
    this.metricsName = metricsName;
  }
}
