package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.Lease;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import dev.nolock.testkit.TcpProxy;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.event.connection.ConnectionActivatedEvent;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.Delay;
import io.vavr.control.Either;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * A fenced write whose answer is lost: Lettuce reconnects and sends the script again by itself (it
 * delivers at least once), so the server runs it twice. The caller must still learn the truth.
 *
 * <p>The writer reaches Redis through a {@link TcpProxy} that drops one answer (or one request) and
 * cuts the connection; the proxy then refuses connections until the test has let another write in,
 * so the resend lands after it. An event listener records when the writer's connection came back,
 * and each test asserts that this was after the other write: the interleaving happened.
 */
@ExtendWith(RedisExtension.class)
class RedisFenceLostAnswerIT {

  private static final AtomicInteger LOCKS = new AtomicInteger();

  private static RedisClient directClient;
  private static RedisURI serverUri;
  private static RedisKeys keys;

  private ClientResources resources;
  private RedisClient proxiedClient;
  private TcpProxy proxy;
  private StatefulRedisConnection<String, String> proxied;
  private StatefulRedisConnection<String, String> direct;
  private RedisFence throughProxy;
  private RedisFence directly;
  private final AtomicLong reconnectedAt = new AtomicLong();
  private String lock;

  @BeforeAll
  static void server(RedisClient client, RedisURI uri, RedisKeys classKeys) {
    directClient = client;
    serverUri = uri;
    keys = classKeys;
  }

  @BeforeEach
  void connectThroughAProxy() {
    lock = "lost-answer-" + LOCKS.incrementAndGet();
    proxy = TcpProxy.start(serverUri.getHost(), serverUri.getPort());
    // A steady reconnect delay: the proxy refuses connections while the other write goes in.
    resources =
        ClientResources.builder().reconnectDelay(Delay.constant(Duration.ofMillis(100))).build();
    resources
        .eventBus()
        .get()
        .filter(ConnectionActivatedEvent.class::isInstance)
        .subscribe(event -> reconnectedAt.set(System.nanoTime()));
    RedisURI throughProxyUri = RedisURI.builder(serverUri).withPort(proxy.port()).build();
    throughProxyUri.setTimeout(Duration.ofSeconds(10));
    proxiedClient = RedisClient.create(resources, throughProxyUri);
    proxied = proxiedClient.connect();
    direct = directClient.connect();
    RedisFenceConfig config = RedisFenceConfig.custom().keyPrefix(keys.key("fence:")).build();
    throughProxy = RedisFence.create(proxied, config);
    directly = RedisFence.create(direct, config);
    directly.seed(0);
    // Cache the script on the server: the armed fault must hit the write, not a NOSCRIPT answer.
    assertThat(throughProxy.write(RedisFenceIT.lease(lock, "earlier", 1), data("warm"), "w"))
        .isEqualTo(Either.right(null));
  }

  @AfterEach
  void close() {
    direct.close();
    proxiedClient.shutdown(Duration.ZERO, Duration.ofSeconds(1));
    resources.shutdown(0, 1, TimeUnit.SECONDS);
    proxy.close();
  }

  @Test
  void aWriteWhoseAnswerWasLostIsReportedAsWrittenAlthoughANewerHolderWroteBeforeTheResend() {
    Lease a = RedisFenceIT.lease(lock, "A", 5);
    Lease b = RedisFenceIT.lease(lock, "B", 6);
    Map<String, String> aWrites = new LinkedHashMap<>();
    aWrites.put(data("status"), "A");
    aWrites.put(data("written-by-a-only"), "A");

    Either<FenceRejection, Void> aResult =
        loseAnswerOf(
            () -> throughProxy.writeAll(a, aWrites),
            () ->
                assertThat(directly.write(b, data("status"), "B"))
                    .as("B, the newer holder, writes while A's resend waits")
                    .isEqualTo(Either.right(null)));

    RedisCommands<String, String> redis = direct.sync();
    assertThat(redis.get(data("written-by-a-only"))).as("A's first send landed").isEqualTo("A");
    assertThat(redis.get(data("status"))).isEqualTo("B");
    assertThat(aResult)
        .as("what A is told about a write that landed (before B's), whose answer was lost")
        .isEqualTo(Either.right(null));
  }

  @Test
  void negativeControlWithoutWriteIdsTheResendIsReportedAsRefusedAlthoughTheWriteLanded() {
    FenceWithoutLossDetection unremembered =
        new FenceWithoutLossDetection(proxied, keys.key("control-fence:"));
    FenceWithoutLossDetection unrememberedDirect =
        new FenceWithoutLossDetection(direct, keys.key("control-fence:"));
    Map<String, String> aWrites = new LinkedHashMap<>();
    aWrites.put(data("status"), "A");
    aWrites.put(data("written-by-a-only"), "A");

    boolean aWritten =
        loseAnswerOf(
            () -> unremembered.writeAll(RedisFenceIT.lease(lock, "A", 5), aWrites),
            () ->
                assertThat(
                        unrememberedDirect.write(
                            RedisFenceIT.lease(lock, "B", 6), data("status"), "B"))
                    .isTrue());

    RedisCommands<String, String> redis = direct.sync();
    assertThat(redis.get(data("written-by-a-only"))).as("A's first send landed").isEqualTo("A");
    assertThat(redis.get(data("status"))).isEqualTo("B");
    assertThat(aWritten).as("the resend met B's newer token: reported as refused").isFalse();
  }

  @Test
  void aResentWriteDoesNotOverwriteTheSameHoldersLaterWrite() {
    Lease a = RedisFenceIT.lease(lock, "A", 5);

    Either<FenceRejection, Void> first =
        loseAnswerOf(
            () -> throughProxy.write(a, data("status"), "first"),
            () ->
                assertThat(directly.write(a, data("status"), "second"))
                    .as("A's next write, sent on another connection while the resend waits")
                    .isEqualTo(Either.right(null)));

    assertThat(first).isEqualTo(Either.right(null));
    assertThat(direct.sync().get(data("status")))
        .as("the resend of A's first write ran again over A's second")
        .isEqualTo("second");
  }

  @Test
  void aWriteLostOnTheWayIsSentAgainAndWrittenOnce() {
    Lease a = RedisFenceIT.lease(lock, "A", 5);
    InjectedFault fault = proxy.loseNext(FaultKind.REQUEST_LOST);

    Either<FenceRejection, Void> result = throughProxy.write(a, data("status"), "A");

    fault.assertFired();
    assertThat(result).isEqualTo(Either.right(null));
    assertThat(direct.sync().get(data("status"))).isEqualTo("A");
  }

  /**
   * Runs {@code write} through the proxy with its answer dropped; while Lettuce cannot reconnect,
   * runs {@code meanwhile} on the direct connection; then lets the resend through.
   */
  private <T> T loseAnswerOf(java.util.function.Supplier<T> write, Runnable meanwhile) {
    InjectedFault fault = proxy.loseNext(FaultKind.ANSWER_LOST);
    CompletableFuture<T> result = CompletableFuture.supplyAsync(write);
    await("the answer was dropped")
        .atMost(Duration.ofSeconds(10))
        .pollInterval(Duration.ofMillis(2))
        .until(fault::fired);
    proxy.cut();
    long connectedBefore = reconnectedAt.get();
    meanwhile.run();
    long meanwhileDone = System.nanoTime();
    proxy.restore();
    T value = result.join();
    fault.assertFired();
    assertThat(reconnectedAt.get())
        .as("the writer's connection came back only after the other write: the resend came later")
        .isNotEqualTo(connectedBefore)
        .isGreaterThan(meanwhileDone);
    return value;
  }

  private String data(String name) {
    return keys.key("data:" + lock + ":" + name);
  }
}
