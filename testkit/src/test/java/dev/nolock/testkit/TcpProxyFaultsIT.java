package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import org.jooq.DSLContext;
import org.jooq.exception.DataAccessException;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(RedisExtension.class)
/** {@link TcpProxy#loseNext} models the faults it names, and Lettuce resends after both. */
class TcpProxyFaultsIT {

  @Test
  void lettuceResendsACommandWhoseAnswerWasLost(RedisClient client, RedisURI uri, RedisKeys keys) {
    String key = keys.key("answer-lost");
    try (TcpProxy proxy = TcpProxy.start(uri.getHost(), uri.getPort());
        StatefulRedisConnection<String, String> through = connect(client, uri, proxy);
        StatefulRedisConnection<String, String> direct = client.connect()) {
      InjectedFault fault = proxy.loseNext(FaultKind.ANSWER_LOST);

      Long answer = through.sync().incr(key);

      fault.assertFired();
      assertThat(direct.sync().get(key)).as("applied twice: sent, then resent").isEqualTo("2");
      assertThat(answer).isEqualTo(2L);
    }
  }

  @Test
  void lettuceResendsACommandLostOnTheWay(RedisClient client, RedisURI uri, RedisKeys keys) {
    String key = keys.key("request-lost");
    try (TcpProxy proxy = TcpProxy.start(uri.getHost(), uri.getPort());
        StatefulRedisConnection<String, String> through = connect(client, uri, proxy);
        StatefulRedisConnection<String, String> direct = client.connect()) {
      InjectedFault fault = proxy.loseNext(FaultKind.REQUEST_LOST);

      Long answer = through.sync().incr(key);

      fault.assertFired();
      assertThat(direct.sync().get(key)).isEqualTo("1");
      assertThat(answer).isEqualTo(1L);
    }
  }

  private static StatefulRedisConnection<String, String> connect(
      RedisClient client, RedisURI uri, TcpProxy proxy) {
    RedisURI through = RedisURI.builder(uri).withPort(proxy.port()).build();
    through.setTimeout(Duration.ofSeconds(10));
    StatefulRedisConnection<String, String> connection = client.connect(through);
    connection.sync().ping();
    return connection;
  }
}
