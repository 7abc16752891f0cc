package dev.nolock.testkit;

import dev.nolock.testkit.internal.ClassResources;
import dev.nolock.testkit.internal.ClassResources.Closing;
import dev.nolock.testkit.internal.HostPort;
import dev.nolock.testkit.internal.Reachability;
import dev.nolock.testkit.internal.Server;
import java.util.Objects;
import org.junit.jupiter.api.extension.BeforeAllCallback;
import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.ParameterContext;
import org.junit.jupiter.api.extension.ParameterResolver;

/**
 * Connects a test class to the real PgBouncer: resolves {@link PgBouncer}.
 *
 * <p>Guarantees: PgBouncer must accept a TCP connection before the class runs, else the class fails
 * with {@link ServerUnreachableException} naming {@code scripts/services up pgbouncer}. No schema
 * is made and no connection is held: tables a test creates through PgBouncer land in the database
 * behind it, so give them unique names or use {@link PostgresExtension} for DDL. Needs {@code
 * org.postgresql:postgresql}.
 */
public final class PgBouncerExtension implements BeforeAllCallback, ParameterResolver {

  private final Endpoints endpoints;

  /** Uses {@link Endpoints#fromEnvironment()}. */
  public PgBouncerExtension() {
    this(Endpoints.fromEnvironment());
  }

  public PgBouncerExtension(Endpoints endpoints) {
    this.endpoints = Objects.requireNonNull(endpoints, "endpoints");
  }

  @Override
  public void beforeAll(ExtensionContext context) {
    pgBouncer(context);
  }

  @Override
  public boolean supportsParameter(ParameterContext parameter, ExtensionContext context) {
    return parameter.getParameter().getType() == PgBouncer.class;
  }

  @Override
  public Object resolveParameter(ParameterContext parameter, ExtensionContext context) {
    return pgBouncer(context);
  }

  private PgBouncer pgBouncer(ExtensionContext context) {
    return ClassResources.getOrCreate(
        context,
        PgBouncerExtension.class,
        endpoints,
        PgBouncer.class,
        () -> {
          String url = endpoints.pgBouncerUrl();
          Reachability.requireReachable(
              Server.PGBOUNCER, HostPort.ofJdbcPostgres(url, Server.PGBOUNCER));
          return new Closing<>(new PgBouncer(url), () -> {});
        });
  }
}
