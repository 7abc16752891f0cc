package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicReference;
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

  @Test
  void meanwhileRunsAfterTheServerAppliedAndBeforeTheClientHearsOfALostAnswer(
      RedisClient client, RedisURI uri, RedisKeys keys) {
    String key = keys.key("answer-lost-meanwhile");
    try (TcpProxy proxy = TcpProxy.start(uri.getHost(), uri.getPort());
        StatefulRedisConnection<String, String> through = connect(client, uri, proxy);
        StatefulRedisConnection<String, String> direct = client.connect()) {
      AtomicBoolean answered = new AtomicBoolean();
      AtomicReference<String> seen = new AtomicReference<>();
      AtomicBoolean answeredBefore = new AtomicBoolean(true);
      InjectedFault fault =
          proxy.loseNext(
              FaultKind.ANSWER_LOST,
              () -> {
                seen.set(direct.sync().get(key));
                answeredBefore.set(answered.get());
              });

      Long answer = through.sync().incr(key);
      answered.set(true);

      fault.assertFired();
      assertThat(seen.get()).as("the key, meanwhile: the first send was applied").isEqualTo("1");
      assertThat(answeredBefore.get()).as("the client had its answer, meanwhile").isFalse();
      assertThat(answer).as("the resend's answer").isEqualTo(2L);
    }
  }

  @Test
  void meanwhileRunsBeforeTheServerSeesALostRequest(
      RedisClient client, RedisURI uri, RedisKeys keys) {
    String key = keys.key("request-lost-meanwhile");
    try (TcpProxy proxy = TcpProxy.start(uri.getHost(), uri.getPort());
        StatefulRedisConnection<String, String> through = connect(client, uri, proxy);
        StatefulRedisConnection<String, String> direct = client.connect()) {
      AtomicReference<String> seen = new AtomicReference<>("not run");
      InjectedFault fault =
          proxy.loseNext(FaultKind.REQUEST_LOST, () -> seen.set(direct.sync().get(key)));

      Long answer = through.sync().incr(key);

      fault.assertFired();
      assertThat(seen.get()).as("the key, meanwhile: nothing applied yet").isNull();
      assertThat(answer).as("the resend is the only send applied").isEqualTo(1L);
    }
  }

  @Test
  void aMeanwhileThatThrowsStillDropsTheConnectionAndFailsTheFaultsCheck(
      RedisClient client, RedisURI uri, RedisKeys keys) {
    String key = keys.key("meanwhile-throws");
    try (TcpProxy proxy = TcpProxy.start(uri.getHost(), uri.getPort());
        StatefulRedisConnection<String, String> through = connect(client, uri, proxy)) {
      InjectedFault fault =
          proxy.loseNext(
              FaultKind.ANSWER_LOST,
              () -> {
                throw new IllegalStateException("meanwhile failed");
              });

      assertThat(through.sync().incr(key)).as("resent after the drop").isEqualTo(2L);

      assertThat(fault.fired()).isTrue();
      assertThatThrownBy(fault::assertFired)
          .isInstanceOf(AssertionError.class)
          .hasMessageContaining("meanwhile failed");
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
