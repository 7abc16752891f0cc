package dev.nolock.lock.postgres;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.patterns.Fence;
import dev.nolock.patterns.Lease;
import dev.nolock.testkit.PausableHolder;
import dev.nolock.testkit.PauseScenario;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.Protection;
import java.time.Duration;
import java.util.Optional;
import java.util.function.Function;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.SQLDialect;
import org.jooq.Table;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * The pause test on the PostgreSQL backend: holders in child JVMs, frozen with SIGSTOP between
 * their point-of-no-return check and their write until their leases expire, resumed after a new
 * holder has written a row through the SQL {@link Fence}.
 */
@ExtendWith(PostgresExtension.class)
class PostgresPauseIT {

  private static final String URL_PROPERTY = "nolock.pause.jdbcUrl";
  private static final Table<?> RESOURCE = table(name("pause_resource"));
  private static final Field<String> LOCK = field(name("lock_name"), String.class);
  private static final Field<String> VALUE = field(name("value"), String.class);

  private static String jdbcUrl;

  @BeforeAll
  static void tables(PostgresSchema schema) {
    jdbcUrl = schema.jdbcUrl();
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
    Fence.onTable(Fence.DEFAULT_TABLE).createTableIfMissing(schema.dsl());
    schema.dsl().execute("create table pause_resource (lock_name text primary key, value text)");
  }

  /** A correctness holder on the PostgreSQL backend that writes one row per lock. */
  public static final class Holder implements PausableHolder {
    private final FencedLock locks;
    private final DSLContext dsl;
    private final Fence fence = Fence.onTable(Fence.DEFAULT_TABLE);

    /** The child JVM's constructor: settings come from system properties. */
    public Holder() {
      this(System.getProperty(URL_PROPERTY));
    }

    Holder(String url) {
      PGSimpleDataSource dataSource = new PGSimpleDataSource();
      dataSource.setURL(url);
      this.dsl = DSL.using(dataSource, SQLDialect.POSTGRES);
      this.locks =
          FencedLock.create(
              PostgresLockBackend.create(dataSource),
              LockConfig.ofDefaults(LockPurpose.CORRECTNESS));
    }

    @Override
    public Lease acquireAndCheck(String lockName, Duration ttl, Duration maxWait) {
      HeldLock held =
          locks
              .acquire(lockName, ttl, maxWait)
              .getOrElseThrow(n -> new IllegalStateException("not acquired: " + n));
      held.checkPointOfNoReturn(Duration.ofMillis(50));
      return held.lease();
    }

    @Override
    public boolean write(Lease lease, String value, Protection protection) {
      Function<DSLContext, Integer> upsert =
          tx ->
              tx.insertInto(RESOURCE, LOCK, VALUE)
                  .values(lease.name(), value)
                  .onConflict(LOCK)
                  .doUpdate()
                  .set(VALUE, value)
                  .execute();
      if (protection == Protection.UNFENCED) {
        dsl.transaction(c -> upsert.apply(c.dsl()));
        return true;
      }
      return fence.write(dsl, lease, upsert).isRight();
    }

    @Override
    public Optional<String> read(String lockName) {
      return dsl.select(VALUE).from(RESOURCE).where(LOCK.eq(lockName)).fetchOptional(VALUE);
    }

    @Override
    public void close() {
      locks.close();
    }
  }

  private PauseScenario scenario() {
    return PauseScenario.builder(Holder.class)
        .pausedHolders(2)
        .childSystemProperty(URL_PROPERTY, jdbcUrl)
        .build();
  }

  @Test
  void staleWritesOfHoldersFrozenBetweenCheckAndWriteAreAllRefused() throws Exception {
    int attempted = 0;
    int refused = 0;
    try (Holder newHolder = new Holder(jdbcUrl)) {
      for (int run = 1; run <= 2; run++) {
        PauseScenario.Result result =
            scenario().run(newHolder, "pause-fenced-" + run, Protection.FENCED);
        System.out.println("PostgreSQL lock, fenced, run " + run + ":\n" + result.timeline());

        assertThat(result.newHolderAccepted()).isTrue();
        assertThat(result.pausedWrites()).hasSize(2);
        for (PauseScenario.PausedWrite stale : result.pausedWrites()) {
          assertThat(stale.attempted()).as("the stale write went out").isTrue();
          assertThat(stale.accepted()).as("and was refused").isFalse();
          assertThat(result.newHolderLease().token().isNewerThan(stale.token())).isTrue();
          attempted++;
          refused += stale.accepted() ? 0 : 1;
        }
        result.auditor().assertNoStaleWriteAccepted();
        assertThat(result.finalValue()).contains("new-holder");
      }
    }
    System.out.printf(
        "PostgreSQL lock, fenced: %d stale writes attempted, %d refused%n", attempted, refused);
    assertThat(attempted).isEqualTo(4);
    assertThat(refused).isEqualTo(4);
  }

  @Test
  void negativeControlWithoutTheFenceTheAuditorReportsTheLostUpdate() throws Exception {
    try (Holder newHolder = new Holder(jdbcUrl)) {
      PauseScenario.Result result =
          scenario().run(newHolder, "pause-unfenced", Protection.UNFENCED);
      System.out.println("PostgreSQL lock, unfenced (negative control):\n" + result.timeline());

      assertThat(result.pausedWrites()).allMatch(PauseScenario.PausedWrite::accepted);
      assertThatThrownBy(() -> result.auditor().assertNoStaleWriteAccepted())
          .isInstanceOf(AssertionError.class)
          .hasMessageContaining("Lost update");
      assertThat(result.finalValue()).isNotEqualTo(Optional.of("new-holder"));
      System.out.printf(
          "PostgreSQL lock, unfenced: %d stale writes accepted (caught by the auditor)%n",
          result.auditor().staleAcceptances().size());
    }
  }
}
