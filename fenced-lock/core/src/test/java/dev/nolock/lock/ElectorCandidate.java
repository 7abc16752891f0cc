package dev.nolock.lock;

import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.sql.SqlResource;
import dev.nolock.testkit.ElectionCandidate;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.Protection;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * A {@link LeaderElector} as testkit's {@code ElectionScenario} drives it, on any backend; the
 * leader writes a {@link SqlResource} row in PostgreSQL through the SQL fence (the lease and the
 * data need not share a server). A backend's election test subclasses it with a public no-argument
 * constructor (shared through this module's test jar).
 *
 * <p>The elector runs with {@code haltOnLoss(false)}: with the default halt, a resumed leader that
 * notices its loss first would exit before its write, which is the halt's point but would hide the
 * write the fence must refuse. The halt itself is proven in {@code LeaderElectorTest}.
 */
public abstract class ElectorCandidate implements ElectionCandidate {

  /** The table whose row the leaders write, through the SQL fence. */
  public static final String RESOURCE_TABLE = "election_resource";

  private final SqlResource resource;
  private LeaderElector elector;

  /** A candidate whose leader writes a row of {@value #RESOURCE_TABLE} at {@code jdbcUrl}. */
  protected ElectorCandidate(String jdbcUrl) {
    PGSimpleDataSource dataSource = new PGSimpleDataSource();
    dataSource.setURL(jdbcUrl);
    this.resource = SqlResource.on(DSL.using(dataSource, SQLDialect.POSTGRES), RESOURCE_TABLE);
  }

  /** Creates the resource's tables in {@code schema}: call it from the test's {@code BeforeAll}. */
  public static void createResourceTables(PostgresSchema schema) {
    SqlResource.on(schema.dsl(), RESOURCE_TABLE).createTablesIfMissing();
  }

  /** The backend this candidate campaigns on. */
  protected abstract LockBackend backend();

  /** Closes what the subclass opened (clients, pools). */
  protected void closeResources() {}

  @Override
  public void campaign(
      String election,
      Duration leaseDuration,
      Duration renewDeadline,
      Duration retryPeriod,
      Events events) {
    elector =
        LeaderElector.start(
            backend(),
            ElectorConfig.custom(election)
                .leaseDuration(leaseDuration)
                .renewDeadline(renewDeadline)
                .retryPeriod(retryPeriod)
                .haltOnLoss(false)
                .build(),
            new Leadership() {
              @Override
              public void onStartedLeading(HeldLock leadership) throws InterruptedException {
                leadership.checkPointOfNoReturn(Duration.ofMillis(50));
                events.elected(leadership.lease());
                new CountDownLatch(1).await(); // the leader works until it is interrupted
              }

              @Override
              public void onStoppedLeading() {
                events.stoppedLeading();
              }

              @Override
              public void onNewLeader(String identity) {
                events.newLeader(identity);
              }
            });
  }

  @Override
  public boolean write(Lease term, String value, Protection protection) {
    return resource.write(term, value, protection);
  }

  @Override
  public Option<String> read(String election) {
    return resource.read(election);
  }

  @Override
  public void close() {
    if (elector != null) {
      elector.close();
    }
    closeResources();
  }
}
