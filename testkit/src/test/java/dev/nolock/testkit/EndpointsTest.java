package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Map;
import org.junit.jupiter.api.Test;

class EndpointsTest {

  @Test
  void unsetVariablesFallBackToLoopbackDefaults() {
    Endpoints endpoints = Endpoints.from(name -> null);

    assertThat(endpoints.postgresUrl())
        .isEqualTo("jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
    assertThat(endpoints.redisUri()).isEqualTo("redis://127.0.0.1:6379");
    assertThat(endpoints.kafkaBootstrap()).isEqualTo("127.0.0.1:9092");
    assertThat(endpoints.dynamoDbEndpoint()).isEqualTo("http://127.0.0.1:4567");
    assertThat(endpoints.etcdEndpoint()).isEqualTo("http://127.0.0.1:2379");
    assertThat(endpoints.pgBouncerUrl())
        .isEqualTo("jdbc:postgresql://127.0.0.1:6432/test?user=postgres&prepareThreshold=0");
    assertThat(endpoints).isEqualTo(Endpoints.defaults());
  }

  @Test
  void eachVariableOverridesItsOwnEndpoint() {
    Map<String, String> environment =
        Map.of(
            "NOLOCK_PG_URL", "jdbc:postgresql://db.test:5433/app?user=app",
            "NOLOCK_REDIS_URI", "redis://cache.test:6380/2",
            "NOLOCK_KAFKA_BOOTSTRAP", "k1.test:9092,k2.test:9093",
            "NOLOCK_DYNAMODB_ENDPOINT", "http://dynamo.test:8000",
            "NOLOCK_ETCD_ENDPOINT", "http://e1.test:2379,http://e2.test:2379",
            "NOLOCK_PGBOUNCER_URL", "jdbc:postgresql://bouncer.test:6432/app?user=app");

    Endpoints endpoints = Endpoints.from(environment::get);

    assertThat(endpoints.postgresUrl()).isEqualTo("jdbc:postgresql://db.test:5433/app?user=app");
    assertThat(endpoints.redisUri()).isEqualTo("redis://cache.test:6380/2");
    assertThat(endpoints.kafkaBootstrap()).isEqualTo("k1.test:9092,k2.test:9093");
    assertThat(endpoints.dynamoDbEndpoint()).isEqualTo("http://dynamo.test:8000");
    assertThat(endpoints.etcdEndpoint()).isEqualTo("http://e1.test:2379,http://e2.test:2379");
    assertThat(endpoints.pgBouncerUrl())
        .isEqualTo("jdbc:postgresql://bouncer.test:6432/app?user=app");
  }

  @Test
  void blankVariableMeansDefault() {
    Endpoints endpoints = Endpoints.from(name -> "  ");

    assertThat(endpoints).isEqualTo(Endpoints.defaults());
  }

  @Test
  void systemPropertyOverridesTheEnvironmentForOneRun() {
    String previous = System.getProperty("NOLOCK_REDIS_URI");
    System.setProperty("NOLOCK_REDIS_URI", "redis://127.0.0.1:7777");
    try {
      assertThat(Endpoints.fromEnvironment().redisUri()).isEqualTo("redis://127.0.0.1:7777");
    } finally {
      if (previous == null) {
        System.clearProperty("NOLOCK_REDIS_URI");
      } else {
        System.setProperty("NOLOCK_REDIS_URI", previous);
      }
    }
  }

  @Test
  void malformedValueIsRefusedWithTheVariableAndAnExample() {
    assertThatThrownBy(() -> Endpoints.from(Map.of("NOLOCK_KAFKA_BOOTSTRAP", "kafka.test")::get))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("NOLOCK_KAFKA_BOOTSTRAP")
        .hasMessageContaining("127.0.0.1:9092");
    assertThatThrownBy(() -> Endpoints.builder().postgresUrl("postgresql://127.0.0.1:5432/test"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("NOLOCK_PG_URL");
    assertThatThrownBy(
            () -> Endpoints.builder().postgresUrl("jdbc:postgresql://127.0.0.1:5432/?user=x"))
        .hasMessageContaining("NOLOCK_PG_URL");
    assertThatThrownBy(() -> Endpoints.builder().redisUri("http://127.0.0.1:6379"))
        .hasMessageContaining("NOLOCK_REDIS_URI");
    assertThatThrownBy(() -> Endpoints.builder().etcdEndpoint("127.0.0.1:2379"))
        .hasMessageContaining("NOLOCK_ETCD_ENDPOINT");
    assertThatThrownBy(
            () -> Endpoints.builder().dynamoDbEndpoint("http://a.test:1,http://b.test:2"))
        .hasMessageContaining("NOLOCK_DYNAMODB_ENDPOINT");
    assertThatThrownBy(() -> Endpoints.builder().kafkaBootstrap("127.0.0.1:99999"))
        .hasMessageContaining("NOLOCK_KAFKA_BOOTSTRAP");
  }

  @Test
  void pgBouncerUrlWithServerSidePreparedStatementsIsRefused() {
    assertThatThrownBy(
            () ->
                Endpoints.builder()
                    .pgBouncerUrl(
                        "jdbc:postgresql://127.0.0.1:6432/test?user=postgres&prepareThreshold=5"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("prepareThreshold=0");
  }

  @Test
  void toBuilderChangesOneEndpointAndKeepsTheRest() {
    Endpoints base = Endpoints.defaults();

    Endpoints changed = base.toBuilder().kafkaBootstrap("127.0.0.1:19092").build();

    assertThat(changed.kafkaBootstrap()).isEqualTo("127.0.0.1:19092");
    assertThat(changed.toBuilder().kafkaBootstrap(base.kafkaBootstrap()).build()).isEqualTo(base);
    assertThat(changed).isNotEqualTo(base);
  }

  @Test
  void toStringShowsNoPassword() {
    Endpoints endpoints =
        Endpoints.builder()
            .postgresUrl("jdbc:postgresql://127.0.0.1:5432/test?user=app&password=secret")
            .redisUri("redis://:secret@127.0.0.1:6379")
            .build();

    assertThat(endpoints.toString()).doesNotContain("secret").contains("127.0.0.1:5432");
  }
}
