package dev.nolock.lock.postgres;

import dev.nolock.lock.ElectorConfig;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LeaderElector;
import dev.nolock.lock.Leadership;
import dev.nolock.patterns.Lease;
import dev.nolock.testkit.PausableHolder;
import dev.nolock.testkit.PauseContract;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import dev.nolock.testkit.Protection;
import dev.nolock.testkit.SqlResource;
import java.time.Duration;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * Three candidates of a {@link LeaderElector} on PostgreSQL: two leaders in turn are frozen with
 * SIGSTOP between their check and their write until the next leader is elected; the third writes;
 * the resumed old leaders' writes are attempted and refused by the fence (and, without it, caught
 * as lost updates). The children run with {@code haltOnLoss(false)}: with the default halt, a
 * resumed leader that notices its loss first would exit before its write, which is the halt's point
 * but would hide the write the fence must refuse.
 */
@ExtendWith(PostgresExtension.class)
class PostgresElectionPauseIT extends PauseContract {

  private static final String URL_PROPERTY = "nolock.election.jdbcUrl";
  private static String jdbcUrl;

  @BeforeAll
  static void tables(PostgresSchema schema) {
    jdbcUrl = schema.jdbcUrl();
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
    SqlResource.on(schema.dsl(), "election_resource").createTablesIfMissing();
  }

  /** A candidate that waits until it leads, then hands its term's lease to the scenario. */
  public static final class Candidate implements PausableHolder {
    private final PostgresLockBackend backend;
    private final SqlResource resource;
    private LeaderElector elector;

    public Candidate() {
      this(System.getProperty(URL_PROPERTY));
    }

    Candidate(String url) {
      PGSimpleDataSource dataSource = new PGSimpleDataSource();
      dataSource.setURL(url);
      this.backend = PostgresLockBackend.create(dataSource);
      this.resource =
          SqlResource.on(DSL.using(dataSource, SQLDialect.POSTGRES), "election_resource");
    }

    @Override
    public Lease acquireAndCheck(String election, Duration ttl, Duration maxWait) {
      CompletableFuture<HeldLock> term = new CompletableFuture<>();
      elector =
          LeaderElector.start(
              backend,
              ElectorConfig.custom(election)
                  .leaseDuration(ttl)
                  .renewDeadline(ttl.multipliedBy(2).dividedBy(3))
                  .retryPeriod(ttl.dividedBy(6))
                  .haltOnLoss(false)
                  .build(),
              new Leadership() {
                @Override
                public void onStartedLeading(HeldLock leadership) throws InterruptedException {
                  term.complete(leadership);
                  new CountDownLatch(1).await(); // the leader works until interrupted
                }

                @Override
                public void onStoppedLeading() {}
              });
      try {
        HeldLock leadership = term.get(maxWait.toMillis(), TimeUnit.MILLISECONDS);
        leadership.checkPointOfNoReturn(Duration.ofMillis(50));
        return leadership.lease();
      } catch (Exception e) {
        throw new IllegalStateException("not elected within " + maxWait, e);
      }
    }

    @Override
    public boolean write(Lease lease, String value, Protection protection) {
      return resource.write(lease, value, protection);
    }

    @Override
    public Optional<String> read(String election) {
      return resource.read(election);
    }

    @Override
    public void close() {
      if (elector != null) {
        elector.close();
      }
    }
  }

  @Override
  protected Class<? extends PausableHolder> holderType() {
    return Candidate.class;
  }

  @Override
  protected Map<String, String> childProperties() {
    return Map.of(URL_PROPERTY, jdbcUrl);
  }

  @Override
  protected PausableHolder newHolder() {
    return new Candidate(jdbcUrl);
  }

  @Override
  protected String label() {
    return "Leader election on PostgreSQL";
  }

  @Override
  protected int fencedRuns() {
    return 1;
  }
}
