package dev.nolock.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.lang.ref.WeakReference;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import javax.sql.DataSource;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The abandoned-keys gauge shows the database of a live instance: one gauge per registry and
 * metrics name, reading the newest {@link IdempotencyKeys} with that name that is still in use, and
 * never pinning an older one (nor its pool) in the registry.
 */
@ExtendWith(PostgresExtension.class)
class AbandonedKeysGaugeIT {

  private static final String GAUGE = "nolock.idempotency.abandoned.keys";

  private static HikariDataSource pool(String jdbcUrl) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(jdbcUrl);
    config.setMaximumPoolSize(2);
    config.setMinimumIdle(0);
    return new HikariDataSource(config);
  }

  /** An abandoned key as the module leaves it: past 'started', unleased, retention run out. */
  private static void abandonedKey(DSLContext dsl, String key) {
    dsl.execute(
        "INSERT INTO nolock_idempotency_keys (scope, principal, idempotency_key, fingerprint,"
            + " state, attempt_token, attempt_count, recovery_point, locked_until, created_at,"
            + " expires_at, downstream_key)"
            + " VALUES ('payments.create', '', ?, 'fp', 'in_progress', 1, 1, 'charged',"
            + " clock_timestamp() - interval '2 days', clock_timestamp() - interval '2 days',"
            + " clock_timestamp() - interval '1 day', gen_random_uuid())",
        key);
  }

  private static double gauge(SimpleMeterRegistry registry, String name) {
    return registry.get(GAUGE).tag("name", name).gauge().value();
  }

  /**
   * Two IdempotencyKeys with the same table name on two databases (here two schemas, as two tenants
   * or shards would be) share one registry. Each names its database in the gauge's tag, so the
   * second's abandoned key (a charge nobody finishes) shows under its own name, and the first's
   * zero under the first name. Before the fix the gauge was per table name and read only the first
   * instance registered: database B's key never showed.
   */
  @Test
  void anAbandonedKeyInTheSecondDatabaseShowsInTheGauge(PostgresSchema a) {
    String schemaB = a.schemaName() + "_b";
    a.dsl().execute("CREATE SCHEMA " + schemaB);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    try (HikariDataSource poolB = pool(a.jdbcUrl().replace(a.schemaName(), schemaB))) {
      IdempotencyKeys<String> keysA =
          IdempotencyKeys.create(
              a.dataSource(),
              IdempotencyConfig.custom().metrics(registry, "tenant-a").build(),
              ResultCodec.utf8());
      keysA.createTableIfMissing();
      IdempotencyKeys<String> keysB =
          IdempotencyKeys.create(
              poolB,
              IdempotencyConfig.custom().metrics(registry, "tenant-b").build(),
              ResultCodec.utf8());
      keysB.createTableIfMissing();
      abandonedKey(DSL.using(poolB, SQLDialect.POSTGRES), "k-b");
      assertThat(keysB.abandonedKeys(10)).as("database B's abandoned keys").hasSize(1);

      assertThat(gauge(registry, "tenant-b"))
          .as("database B's abandoned keys in the gauge named after database B")
          .isEqualTo(1.0);
      assertThat(gauge(registry, "tenant-a"))
          .as("database A's abandoned keys in the gauge named after database A")
          .isEqualTo(0.0);
    } finally {
      a.dsl().execute("DROP SCHEMA " + schemaB + " CASCADE");
    }
  }

  /**
   * The first instance's pool is closed (a component restarted, a tenant re-configured); a new
   * instance on a live pool, the same registry and name: the gauge reads the new instance. Before
   * the fix it kept asking the closed pool and read NaN ("PostgreSQL cannot be reached") for the
   * rest of the JVM's life.
   */
  @Test
  void theGaugeOfALiveInstanceIsNotNaNBecauseAnEarlierInstancesPoolWasClosed(PostgresSchema s) {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    IdempotencyConfig config = IdempotencyConfig.custom().metrics(registry, "live").build();
    try (HikariDataSource first = pool(s.jdbcUrl())) {
      IdempotencyKeys.create(first, config, ResultCodec.utf8()).createTableIfMissing();
    }
    IdempotencyKeys<String> live =
        IdempotencyKeys.create(s.dataSource(), config, ResultCodec.utf8());
    assertThat(live.abandonedKeys(10)).as("the live instance reaches PostgreSQL").isEmpty();

    assertThat(registry.get(GAUGE).gauge().value())
        .as("the abandoned-keys gauge while the live instance reaches PostgreSQL")
        .isEqualTo(0.0);
  }

  /**
   * An instance nobody uses any more is not kept alive by the registry's gauge, nor is its pool:
   * the gauge holds it weakly. Once it is collected, and no other instance has the name, the gauge
   * reads NaN rather than a count from a pool that may be closed.
   */
  @Test
  void theRegistryDoesNotPinAnInstanceTheApplicationDropped(PostgresSchema s) {
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    WeakReference<DataSource> dropped = createAndDrop(s, registry);
    assertThat(gauge(registry, "pinned-test")).as("the gauge while the instance lives").isZero();

    for (int i = 0; i < 20 && dropped.get() != null; i++) {
      System.gc(); // a request, not a promise: asked a bounded number of times
    }

    assertThat(dropped.get())
        .as("the pool of an IdempotencyKeys the application dropped, after garbage collections")
        .isNull();
    assertThat(gauge(registry, "pinned-test")).as("the gauge with no instance left").isNaN();
  }

  /** Creates an instance on a pool of its own and keeps nothing of it but a weak reference. */
  private static WeakReference<DataSource> createAndDrop(
      PostgresSchema s, SimpleMeterRegistry registry) {
    DataSource pool = delegatingTo(s.dataSource());
    IdempotencyKeys<String> keys =
        IdempotencyKeys.create(
            pool,
            IdempotencyConfig.custom().metrics(registry, "pinned-test").build(),
            ResultCodec.utf8());
    keys.createTableIfMissing();
    return new WeakReference<>(pool);
  }

  /** A pool object of its own, referenced only by the instance that uses it. */
  private static DataSource delegatingTo(DataSource target) {
    return (DataSource)
        Proxy.newProxyInstance(
            AbandonedKeysGaugeIT.class.getClassLoader(),
            new Class<?>[] {DataSource.class},
            (proxy, method, args) -> {
              try {
                return method.invoke(target, args);
              } catch (InvocationTargetException e) {
                throw e.getCause();
              }
            });
  }
}
