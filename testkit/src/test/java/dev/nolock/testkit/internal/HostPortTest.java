package dev.nolock.testkit.internal;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class HostPortTest {

  @Test
  void jdbcUrlsYieldEveryHostWithDefaultPort() {
    assertThat(
            HostPort.ofJdbcPostgres(
                "jdbc:postgresql://a.test,b.test:5433,[::1]:5434/db?user=u", Server.POSTGRES))
        .containsExactly(
            new HostPort("a.test", 5432), new HostPort("b.test", 5433), new HostPort("::1", 5434));
  }

  @Test
  void redisAndHttpEndpointsUseTheirSchemesDefaultPorts() {
    assertThat(HostPort.ofRedisUri("redis://:pw@cache.test/3", Server.REDIS))
        .containsExactly(new HostPort("cache.test", 6379));
    assertThat(
            HostPort.ofHttpEndpoints(
                "http://e.test:2379, https://f.test", Server.ETCD, "http://127.0.0.1:2379"))
        .containsExactly(new HostPort("e.test", 2379), new HostPort("f.test", 443));
  }

  @Test
  void kafkaBootstrapRequiresAPortOnEveryEntry() {
    assertThat(HostPort.ofBootstrapServers("k1:9092,k2:9093", Server.KAFKA))
        .containsExactly(new HostPort("k1", 9092), new HostPort("k2", 9093));
    assertThatThrownBy(() -> HostPort.ofBootstrapServers("k1:9092,k2", Server.KAFKA))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("NOLOCK_KAFKA_BOOTSTRAP");
  }

  @Test
  void ipv6HostsPrintInBrackets() {
    assertThat(new HostPort("::1", 5432)).hasToString("[::1]:5432");
    assertThat(new HostPort("127.0.0.1", 5432)).hasToString("127.0.0.1:5432");
  }
}
