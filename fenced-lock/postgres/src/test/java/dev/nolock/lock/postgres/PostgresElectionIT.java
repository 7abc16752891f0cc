package dev.nolock.lock.postgres;

import dev.nolock.lock.ElectorCandidate;
import dev.nolock.lock.LeaderElector;
import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.ElectionCandidate;
import dev.nolock.testkit.ElectionContract;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * Three {@link LeaderElector} candidates in child JVMs on the PostgreSQL backend: the frozen
 * leader's write is refused by the fence, the killed leader is replaced, and without the fence the
 * auditor catches the double leader.
 */
@ExtendWith(PostgresExtension.class)
class PostgresElectionIT extends ElectionContract {

  private static final String URL_PROPERTY = "nolock.election.jdbcUrl";
  private static String jdbcUrl;

  @BeforeAll
  static void tables(PostgresSchema schema) {
    jdbcUrl = schema.jdbcUrl();
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
    ElectorCandidate.createResourceTables(schema);
  }

  /** A candidate campaigning on PostgreSQL; the child JVM's constructor reads the JDBC URL. */
  public static final class Candidate extends ElectorCandidate {
    private final PostgresLockBackend backend;

    public Candidate() {
      this(System.getProperty(URL_PROPERTY));
    }

    Candidate(String url) {
      super(url);
      PGSimpleDataSource dataSource = new PGSimpleDataSource();
      dataSource.setURL(url);
      this.backend = PostgresLockBackend.create(dataSource);
    }

    @Override
    protected LockBackend backend() {
      return backend;
    }
  }

  @Override
  protected Class<? extends ElectionCandidate> candidateType() {
    return Candidate.class;
  }

  @Override
  protected Map<String, String> childProperties() {
    return Map.of(URL_PROPERTY, jdbcUrl);
  }

  @Override
  protected ElectionCandidate newReader() {
    return new Candidate(jdbcUrl);
  }

  @Override
  protected String label() {
    return "Leader election on PostgreSQL";
  }
}
