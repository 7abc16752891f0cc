package dev.nolock.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * A JMH fork's command line (which every local user reads in {@code ps}, and which JMH records in
 * its JSON as {@code jvmArgs}) never carries an endpoint's password; the forks read the {@code
 * NOLOCK_*} variables from the environment they inherit. Before, every endpoint was a {@code -D}.
 */
class ForkPropertiesTest {

  @AfterEach
  void clear() {
    System.clearProperty(Bench.REDIS_URI);
    System.clearProperty(Bench.PG_URL);
  }

  @Test
  void endpointsFromTheEnvironmentAreNotForkOptions() {
    assertThat(Servers.forkProperties()).isEmpty();
  }

  @Test
  void anEmbeddedServersEndpointIsOne() {
    System.setProperty(Bench.REDIS_URI, "redis://127.0.0.1:6390");
    assertThat(Servers.forkProperties())
        .containsExactly("-Dnolock.redis.uri=redis://127.0.0.1:6390");
  }

  @Test
  void anEndpointWithAPasswordIsRefusedAsAForkOption() {
    System.setProperty(Bench.REDIS_URI, "redis://:s3cret@127.0.0.1:6379");
    assertThatThrownBy(Servers::forkProperties)
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("NOLOCK_REDIS_URI")
        .hasMessageNotContaining("s3cret");
  }

  @Test
  void passwordsAreLeftOutOfWhatTheRunPrints() {
    assertThat(Bench.withoutPassword("redis://:s3cret@127.0.0.1:6379/0"))
        .isEqualTo("redis://:***@127.0.0.1:6379/0");
    assertThat(Bench.withoutPassword("redis://user:s3cret@127.0.0.1:6379"))
        .isEqualTo("redis://user:***@127.0.0.1:6379");
    assertThat(
            Bench.withoutPassword(
                "jdbc:postgresql://127.0.0.1:6432/test?user=postgres&password=s3cret&x=1"))
        .isEqualTo("jdbc:postgresql://127.0.0.1:6432/test?user=postgres&password=***&x=1");
    assertThat(Bench.withoutPassword("redis://127.0.0.1:6379")).isEqualTo("redis://127.0.0.1:6379");
  }
}
