package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import io.etcd.jetcd.Client;
import io.lettuce.core.RedisClient;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.RegisterExtension;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.testkit.engine.EngineExecutionResults;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Event;
import software.amazon.awssdk.services.dynamodb.DynamoDbClient;

/**
 * Runs small test classes whose extension points at a closed loopback port, through the JUnit
 * engine, and checks that each one fails (not skips, not hangs) with the start command.
 */
class UnreachableServerTest {

  static final int CLOSED_PORT = closedLoopbackPort();

  static Stream<Arguments> unreachableServers() {
    String port = String.valueOf(CLOSED_PORT);
    return Stream.of(
        Arguments.of(
            PostgresCase.class,
            "PostgreSQL is not reachable at 127.0.0.1:"
                + port
                + " (NOLOCK_PG_URL). Start it with: scripts/services up postgres"),
        Arguments.of(
            RedisCase.class,
            "Redis is not reachable at 127.0.0.1:"
                + port
                + " (NOLOCK_REDIS_URI). Start it with: scripts/services up redis"),
        Arguments.of(
            KafkaCase.class,
            "Kafka is not reachable at 127.0.0.1:"
                + port
                + " (NOLOCK_KAFKA_BOOTSTRAP). Start it with: scripts/services up kafka"),
        Arguments.of(
            DynamoDbCase.class,
            "DynamoDB (dynalite) is not reachable at 127.0.0.1:"
                + port
                + " (NOLOCK_DYNAMODB_ENDPOINT). Start it with: scripts/services up dynamodb"),
        Arguments.of(
            EtcdCase.class,
            "etcd is not reachable at 127.0.0.1:"
                + port
                + " (NOLOCK_ETCD_ENDPOINT). Start it with: scripts/services up etcd"),
        Arguments.of(
            PgBouncerCase.class,
            "PgBouncer is not reachable at 127.0.0.1:"
                + port
                + " (NOLOCK_PGBOUNCER_URL). Start it with: scripts/services up pgbouncer"));
  }

  @ParameterizedTest(name = "{0}")
  @MethodSource("unreachableServers")
  void unreachableServerFailsTheClassWithTheStartCommand(
      Class<?> testCase, String expectedMessage) {
    EngineExecutionResults results =
        EngineTestKit.engine("junit-jupiter").selectors(selectClass(testCase)).execute();

    List<Throwable> failures =
        results.allEvents().failed().stream().map(UnreachableServerTest::throwable).toList();
    assertThat(failures)
        .singleElement()
        .isInstanceOf(ServerUnreachableException.class)
        .extracting(Throwable::getMessage)
        .asString()
        .startsWith(expectedMessage);
    assertThat(results.allEvents().aborted().count()).as("aborted (skipped) events").isZero();
    assertThat(results.testEvents().succeeded().count()).as("tests that ran anyway").isZero();
  }

  @Test
  void instanceFieldRegistrationFailsTheTestThatAsksForTheResource() {
    EngineExecutionResults results =
        EngineTestKit.engine("junit-jupiter")
            .selectors(selectClass(InstanceFieldCase.class))
            .execute();

    assertThat(results.testEvents().failed().stream().map(UnreachableServerTest::throwable))
        .singleElement()
        .extracting(Throwable::getMessage)
        .asString()
        .contains("scripts/services up postgres");
  }

  private static Throwable throwable(Event event) {
    return event.getRequiredPayload(TestExecutionResult.class).getThrowable().orElseThrow();
  }

  static Endpoints closedEndpoints() {
    String port = String.valueOf(CLOSED_PORT);
    return Endpoints.builder()
        .postgresUrl("jdbc:postgresql://127.0.0.1:" + port + "/test?user=postgres")
        .redisUri("redis://127.0.0.1:" + port)
        .kafkaBootstrap("127.0.0.1:" + port)
        .dynamoDbEndpoint("http://127.0.0.1:" + port)
        .etcdEndpoint("http://127.0.0.1:" + port)
        .pgBouncerUrl("jdbc:postgresql://127.0.0.1:" + port + "/test?user=postgres")
        .build();
  }

  private static int closedLoopbackPort() {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  // The classes below run only through EngineTestKit above (Surefire skips nested classes).

  static class PostgresCase {
    @RegisterExtension
    static final PostgresExtension SERVER = new PostgresExtension(closedEndpoints());

    @Test
    void needsTheServer(PostgresSchema schema) {
      assertThat(schema).isNotNull();
    }
  }

  static class RedisCase {
    @RegisterExtension static final RedisExtension SERVER = new RedisExtension(closedEndpoints());

    @Test
    void needsTheServer(RedisClient client) {
      assertThat(client).isNotNull();
    }
  }

  static class KafkaCase {
    @RegisterExtension static final KafkaExtension SERVER = new KafkaExtension(closedEndpoints());

    @Test
    void needsTheServer(KafkaBroker broker) {
      assertThat(broker).isNotNull();
    }
  }

  static class DynamoDbCase {
    @RegisterExtension
    static final DynamoDbExtension SERVER = new DynamoDbExtension(closedEndpoints());

    @Test
    void needsTheServer(DynamoDbClient client) {
      assertThat(client).isNotNull();
    }
  }

  static class EtcdCase {
    @RegisterExtension static final EtcdExtension SERVER = new EtcdExtension(closedEndpoints());

    @Test
    void needsTheServer(Client client) {
      assertThat(client).isNotNull();
    }
  }

  static class PgBouncerCase {
    @RegisterExtension
    static final PgBouncerExtension SERVER = new PgBouncerExtension(closedEndpoints());

    @Test
    void needsTheServer(PgBouncer pgBouncer) {
      assertThat(pgBouncer).isNotNull();
    }
  }

  static class InstanceFieldCase {
    // On an instance field there is no beforeAll: the failure comes at parameter resolution.
    @RegisterExtension final PostgresExtension server = new PostgresExtension(closedEndpoints());

    @Test
    void needsTheServer(PostgresSchema schema) {
      assertThat(schema).isNotNull();
    }
  }
}
