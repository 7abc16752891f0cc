package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.redis.internal.Scripts;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.FencingToken;
import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.event.command.CommandBaseEvent;
import io.lettuce.core.event.command.CommandFailedEvent;
import io.lettuce.core.event.command.CommandListener;
import io.lettuce.core.event.command.CommandSucceededEvent;
import io.vavr.control.Either;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

/**
 * The scripts run with {@code EVALSHA} and fall back to {@code EVAL} when the server has lost its
 * script cache. On a private server, because {@code SCRIPT FLUSH} would empty the cache of everyone
 * who shares a server.
 *
 * <p>A command listener records every script call with its arguments; each test looks only at the
 * calls that name its own lock, so the log needs no clearing between steps.
 */
class RedisScriptFallbackIT {

  private static final Duration TTL = Duration.ofSeconds(10);
  private static final String NOSCRIPT = "EVALSHA failed: NOSCRIPT";

  private record ScriptCall(String command, String args) {}

  private static final List<ScriptCall> calls = new CopyOnWriteArrayList<>();

  private static PrivateRedisServer server;
  private static RedisClient client;
  private static StatefulRedisConnection<String, String> connection;
  private static RedisCommands<String, String> redis;
  private static RedisLockBackend backend;

  @BeforeAll
  static void start() throws IOException {
    server = PrivateRedisServer.start();
    client = RedisClient.create(server.uri());
    client.addListener(
        new CommandListener() {
          @Override
          public void commandSucceeded(CommandSucceededEvent event) {
            record(event, event.getCommand().getType().toString());
          }

          @Override
          public void commandFailed(CommandFailedEvent event) {
            record(
                event, event.getCommand().getType() + " failed: " + event.getCause().getMessage());
          }
        });
    connection = client.connect();
    redis = connection.sync();
    backend = RedisLockBackend.create(connection);
  }

  private static void record(CommandBaseEvent event, String outcome) {
    if (event.getCommand().getType().toString().startsWith("EVAL")) {
      calls.add(new ScriptCall(outcome, String.valueOf(event.getCommand().getArgs())));
    }
  }

  @AfterAll
  static void stop() throws IOException {
    if (client != null) {
      client.shutdown(Duration.ZERO, Duration.ofSeconds(2));
    }
    if (server != null) {
      server.close();
    }
  }

  @Test
  void afterScriptFlushEvalShaFallsBackToEvalAndTheScriptIsCachedAgain() {
    warmUp("warm-up-1");
    FencingToken first = backend.tryAcquire("flushed", "A", TTL).get();
    assertThat(backend.release("flushed", "A", first)).isTrue();
    assertThat(redis.scriptExists(Scripts.ACQUIRE.sha(), Scripts.RELEASE.sha()))
        .containsExactly(true, true);

    redis.scriptFlush();
    assertThat(redis.scriptExists(Scripts.ACQUIRE.sha(), Scripts.RELEASE.sha()))
        .containsExactly(false, false);
    FencingToken second = backend.tryAcquire("flushed", "B", TTL).get();
    boolean released = backend.release("flushed", "B", second);

    assertThat(second)
        .as("the counter is data, not a script")
        .isEqualTo(FencingToken.of(first.value() + 1));
    assertThat(released).isTrue();
    await()
        .untilAsserted(
            () ->
                assertThat(callsNaming("flushed"))
                    .satisfiesExactly(
                        call -> assertThat(call).isEqualTo("EVALSHA"),
                        call -> assertThat(call).isEqualTo("EVALSHA"),
                        call -> assertThat(call).startsWith(NOSCRIPT),
                        call -> assertThat(call).isEqualTo("EVAL"),
                        call -> assertThat(call).startsWith(NOSCRIPT),
                        call -> assertThat(call).isEqualTo("EVAL")));
    assertThat(redis.scriptExists(Scripts.ACQUIRE.sha(), Scripts.RELEASE.sha()))
        .as("EVAL cached the scripts again")
        .containsExactly(true, true);
  }

  @Test
  void onceCachedEveryCallIsOneEvalSha() {
    warmUp("warm-up-2");
    FencingToken token = backend.tryAcquire("cached", "A", TTL).get();
    assertThat(backend.renew("cached", "A", token, TTL)).isTrue();
    assertThat(backend.release("cached", "A", token)).isTrue();

    await()
        .untilAsserted(
            () ->
                assertThat(callsNaming("cached")).containsExactly("EVALSHA", "EVALSHA", "EVALSHA"));
  }

  @Test
  void theFenceScriptFallsBackToo() {
    RedisFence fence = RedisFence.create(connection);
    fence.establish(0);
    redis.scriptFlush();

    Either<FenceRejection, Void> written =
        fence.write(RedisFenceIT.lease("fallback-lock", "A", 1), "fallback-data", "value");

    assertThat(written.isRight()).isTrue();
    assertThat(redis.get("fallback-data")).isEqualTo("value");
    await()
        .untilAsserted(
            () ->
                assertThat(callsNaming("fallback-data"))
                    .satisfiesExactly(
                        call -> assertThat(call).startsWith(NOSCRIPT),
                        call -> assertThat(call).isEqualTo("EVAL")));
  }

  /** Loads the acquire, renew and release scripts into the server's cache. */
  private static void warmUp(String name) {
    FencingToken token = backend.tryAcquire(name, "warm-up", TTL).get();
    backend.renew(name, "warm-up", token, TTL);
    backend.release(name, "warm-up", token);
  }

  private static List<String> callsNaming(String name) {
    return calls.stream()
        .filter(call -> call.args().contains(name))
        .map(ScriptCall::command)
        .toList();
  }
}
