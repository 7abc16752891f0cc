package dev.nolock.spring.autoconfigure;

import org.springframework.boot.context.properties.ConfigurationProperties;

/** What every nolock pattern in a Spring application shares, under {@code nolock.*}. */
@ConfigurationProperties("nolock")
public class NolockProperties {

  /**
   * Whether each pattern creates its tables at start-up when they are missing. Off by default:
   * production schemas come from the migrations each module ships (its README, Migrations), and
   * the database user of a running application often may not create tables.
   */
  private boolean createTables;

  public boolean isCreateTables() {
    return createTables;
  }

  public void setCreateTables(boolean createTables) {
    this.createTables = createTables;
  }
}
