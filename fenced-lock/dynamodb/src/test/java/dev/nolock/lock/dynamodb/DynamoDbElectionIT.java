package dev.nolock.lock.dynamodb;

import dev.nolock.lock.ElectorCandidate;
import dev.nolock.lock.LeaderElector;
import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.DynamoDbExtension;
import dev.nolock.testkit.ElectionCandidate;
import dev.nolock.testkit.ElectionContract;
import dev.nolock.testkit.Endpoints;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.extension.ExtendWith;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * Three {@link LeaderElector} candidates in child JVMs on the DynamoDB backend, where no server
 * clock judges expiry: each candidate process waits the stored lease duration from when it last saw
 * the record version change. The leader's writes go to a PostgreSQL row through the SQL fence.
 */
@ExtendWith({PostgresExtension.class, DynamoDbExtension.class})
class DynamoDbElectionIT extends ElectionContract {

  private static final String URL_PROPERTY = "nolock.election.jdbcUrl";
  private static final String ENDPOINT_PROPERTY = "nolock.election.dynamodbEndpoint";
  private static final String TABLE_PROPERTY = "nolock.election.lockTable";
  private static DynamoDbClient dynamo;
  private static String jdbcUrl;
  private static String endpoint;
  private static String lockTable;

  @BeforeAll
  static void setUp(PostgresSchema schema, DynamoDbClient client) {
    dynamo = client;
    jdbcUrl = schema.jdbcUrl();
    endpoint = Endpoints.fromEnvironment().dynamoDbEndpoint();
    lockTable = LockTables.backendOnNewTable(dynamo, "nolock_election_").config().tableName();
    ElectorCandidate.createResourceTables(schema);
  }

  @AfterAll
  static void dropTable() {
    LockTables.drop(dynamo, lockTable);
  }

  /** A candidate campaigning on DynamoDB; the child JVM's constructor reads its settings. */
  public static final class Candidate extends ElectorCandidate {
    private final DynamoDbClient client;
    private final DynamoDbLockBackend backend;

    public Candidate() {
      this(
          System.getProperty(URL_PROPERTY),
          System.getProperty(ENDPOINT_PROPERTY),
          System.getProperty(TABLE_PROPERTY));
    }

    Candidate(String url, String dynamoDbEndpoint, String table) {
      super(url);
      this.client = DynamoDbExtension.newClient(dynamoDbEndpoint);
      this.backend =
          DynamoDbLockBackend.create(
              client, DynamoDbLockBackendConfig.custom().tableName(table).build());
    }

    @Override
    protected LockBackend backend() {
      return backend;
    }

    @Override
    protected void closeResources() {
      client.close();
    }
  }

  @Override
  protected Class<? extends ElectionCandidate> candidateType() {
    return Candidate.class;
  }

  @Override
  protected Map<String, String> childProperties() {
    return Map.of(URL_PROPERTY, jdbcUrl, ENDPOINT_PROPERTY, endpoint, TABLE_PROPERTY, lockTable);
  }

  @Override
  protected ElectionCandidate newReader() {
    return new Candidate(jdbcUrl, endpoint, lockTable);
  }

  @Override
  protected String label() {
    return "Leader election on DynamoDB";
  }
}
