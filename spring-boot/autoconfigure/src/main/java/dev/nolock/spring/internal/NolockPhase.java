package dev.nolock.spring.internal;

import org.springframework.context.SmartLifecycle;

/** The lifecycle phase of nolock's long-running components. */
public final class NolockPhase {

  /**
   * Spring stops higher phases first. The web server's graceful shutdown runs at {@code
   * DEFAULT_PHASE - 1024} and the server stops at {@code DEFAULT_PHASE - 2048}: below both, nolock
   * stops only once no request can still use a lock or a leader's work. Well above 0, where Spring
   * Data Redis's {@code LettuceConnectionFactory} shuts its client down, so leases are still
   * released over a live connection; the {@code DataSource} closes later still, at bean
   * destruction.
   */
  public static final int PHASE = SmartLifecycle.DEFAULT_PHASE - 4096;

  private NolockPhase() {}
}
