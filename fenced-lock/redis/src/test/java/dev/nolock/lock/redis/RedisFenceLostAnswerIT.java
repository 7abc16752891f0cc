package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.redis.internal.Scripts;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FenceRejection;
import dev.nolock.patterns.Lease;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import dev.nolock.testkit.TcpProxy;
import io.lettuce.core.RedisChannelHandler;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisConnectionStateListener;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.event.command.CommandListener;
import io.lettuce.core.event.command.CommandStartedEvent;
import io.lettuce.core.protocol.CommandType;
import io.lettuce.core.protocol.RedisCommand;
import io.lettuce.core.resource.ClientResources;
import io.lettuce.core.resource.Delay;
import io.vavr.control.Either;
import java.net.SocketAddress;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Predicate;
import java.util.function.Supplier;
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
 * so the resend lands after it. The fault is armed when Lettuce starts the fenced-write script (a
 * command listener), not before the call: the fence first reads its write horizon, whose answer
 * must pass. A connection-state listener records when the writer's connection came back, and each
 * test asserts that this was after the other write: the interleaving happened.
 *
 * <p>Then the same with a fence that remembers only the last two write ids, and more writes in
 * between: the resend can no longer be recognised, and is reported unknown — not refused, not
 * applied a second time.
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
  private final AtomicReference<ArmedOnScript> armOnNextScript = new AtomicReference<>();
  private String lock;

  /** A fault to arm when the proxied client starts the next script command that {@code matches}. */
  private record ArmedOnScript(
      FaultKind kind,
      Predicate<RedisCommand<?, ?, ?>> matches,
      CompletableFuture<InjectedFault> fault) {}

  /** A second before the first reconnect attempt, then 100 ms between attempts. */
  private static final class SlowFirstReconnect extends Delay {
    @Override
    public Duration createDelay(long attempt) {
      return attempt <= 1 ? Duration.ofSeconds(1) : Duration.ofMillis(100);
    }
  }

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
    // The first reconnect waits a second: by then the test has cut the proxy (within
    // milliseconds of the fault, even on a loaded machine), so it cannot slip in before the other
    // write; later attempts are quick, and the one after the proxy is restored succeeds.
    resources = ClientResources.builder().reconnectDelay(new SlowFirstReconnect()).build();
    RedisURI throughProxyUri = RedisURI.builder(serverUri).withPort(proxy.port()).build();
    throughProxyUri.setTimeout(Duration.ofSeconds(10));
    proxiedClient = RedisClient.create(resources, throughProxyUri);
    // Called on the event loop when the TCP connection is up, before Lettuce resends anything on
    // it: by the time the resend's answer completes the call, the time is recorded.
    proxiedClient.addListener(
        new RedisConnectionStateListener() {
          @Override
          public void onRedisConnected(
              RedisChannelHandler<?, ?> connection, SocketAddress address) {
            reconnectedAt.set(System.nanoTime());
          }
        });
    proxiedClient.addListener(
        new CommandListener() {
          @Override
          public void commandStarted(CommandStartedEvent event) {
            // Runs before Lettuce writes the command: the fault is armed before its bytes leave.
            ArmedOnScript armed = armOnNextScript.get();
            if (armed != null
                && armed.matches().test(event.getCommand())
                && armOnNextScript.compareAndSet(armed, null)) {
              armed.fault().complete(proxy.loseNext(armed.kind()));
            }
          }
        });
    proxied = proxiedClient.connect();
    direct = directClient.connect();
    RedisFenceConfig config = RedisFenceConfig.custom().keyPrefix(keys.key("fence:")).build();
    throughProxy = RedisFence.create(proxied, config);
    directly = RedisFence.create(direct, config);
    directly.establish(0);
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
  void aWriteLostOnTheWayIsSentAgainAndWrittenOnce() throws Exception {
    Lease a = RedisFenceIT.lease(lock, "A", 5);
    CompletableFuture<InjectedFault> fault =
        armOnNextScript(FaultKind.REQUEST_LOST, RedisFenceLostAnswerIT::isFencedWrite);

    Either<FenceRejection, Void> result = throughProxy.write(a, data("status"), "A");

    fault.getNow(null).assertFired();
    assertThat(result).isEqualTo(Either.right(null));
    assertThat(direct.sync().get(data("status"))).isEqualTo("A");
  }

  // --- a resend whose write id was forgotten ---

  @Test
  void aResendWhoseWriteIdWasForgottenIsReportedUnknownNotRefused() {
    ShortMemory fences = shortMemory();
    Map<String, String> aWrites = new LinkedHashMap<>();
    aWrites.put(data("status"), "A");
    aWrites.put(data("written-by-a-only"), "A");
    long before = fences.lastSequence();

    String aOutcome =
        loseAnswerOf(
            () ->
                outcomeOf(
                    () ->
                        fences.throughProxy().writeAll(RedisFenceIT.lease(lock, "A", 5), aWrites)),
            () -> {
              assertThat(
                      fences
                          .directly()
                          .write(RedisFenceIT.lease(lock, "B", 6), data("status"), "B"))
                  .as("B, the newer holder, writes while A's resend waits")
                  .isEqualTo(Either.right(null));
              fences.twoMoreWritesOnAnotherLock();
              fences.assertForgotten(before + 1);
            });

    RedisCommands<String, String> redis = direct.sync();
    assertThat(redis.get(data("written-by-a-only"))).as("A's first send landed").isEqualTo("A");
    assertThat(redis.get(data("status"))).isEqualTo("B");
    assertThat(aOutcome)
        .as(
            "what A is told about a write that landed (before B's), whose answer was lost and whose"
                + " write id was forgotten before the resend: unknown, not a refusal")
        .startsWith("unknown: RedisFence cannot tell whether the write");
  }

  @Test
  void aResendWhoseWriteIdWasForgottenIsNotAppliedAgainOverTheSameHoldersLaterWrite() {
    ShortMemory fences = shortMemory();
    Lease a = RedisFenceIT.lease(lock, "A", 5);
    long before = fences.lastSequence();

    String first =
        loseAnswerOf(
            () -> outcomeOf(() -> fences.throughProxy().write(a, data("status"), "first")),
            () -> {
              assertThat(fences.directly().write(a, data("status"), "second"))
                  .as("A's next write, sent on another connection while the resend waits")
                  .isEqualTo(Either.right(null));
              fences.twoMoreWritesOnAnotherLock();
              fences.assertForgotten(before + 1);
            });

    assertThat(direct.sync().get(data("status")))
        .as(
            "the resend of A's first write, whose id was forgotten, did not run again over A's"
                + " second")
        .isEqualTo("second");
    assertThat(first).startsWith("unknown: ");
  }

  @Test
  void aResendAfterTheFenceWasEstablishedAgainIsReportedUnknownNotAppliedAgain() {
    RedisFenceConfig config =
        RedisFenceConfig.custom().keyPrefix(keys.key("reestablished-fence:" + lock + ":")).build();
    RedisFence aFence = RedisFence.create(proxied, config);
    RedisFence operator = RedisFence.create(direct, config);
    operator.establish(0);
    Lease a = RedisFenceIT.lease(lock, "A", 5);

    String first =
        loseAnswerOf(
            () -> outcomeOf(() -> aFence.write(a, data("status"), "first")),
            () -> {
              // The fence's state alone is lost (as an eviction would), and an operator
              // re-establishes.
              assertThat(direct.sync().del(config.stateKey()))
                  .as("the fault fired: the state, with A's write id, is gone")
                  .isOne();
              // Token 4 was the highest before A's grant: A's 5 stays above the floor.
              operator.establish(4);
              assertThat(operator.write(a, data("status"), "second"))
                  .as("A's next write, sent on another connection while the resend waits")
                  .isEqualTo(Either.right(null));
            });

    assertThat(direct.sync().get(data("status")))
        .as("the resend of A's first write did not run again over A's second")
        .isEqualTo("second");
    assertThat(first)
        .startsWith("unknown: ")
        .contains("the fence was established again while the call was under way");
  }

  @Test
  void negativeControlWithoutWriteIdsTheResendRunsAgainOverTheSameHoldersLaterWrite() {
    FenceWithoutLossDetection unremembered =
        new FenceWithoutLossDetection(proxied, keys.key("control-fence:"));
    FenceWithoutLossDetection unrememberedDirect =
        new FenceWithoutLossDetection(direct, keys.key("control-fence:"));
    Lease a = RedisFenceIT.lease(lock, "A", 5);

    boolean firstWritten =
        loseAnswerOf(
            () -> unremembered.write(a, data("status"), "first"),
            () -> assertThat(unrememberedDirect.write(a, data("status"), "second")).isTrue());

    assertThat(firstWritten).isTrue();
    assertThat(direct.sync().get(data("status")))
        .as("the resend of A's first write ran again over A's second")
        .isEqualTo("first");
  }

  /**
   * Fences that remember only the last two write ids: one through the proxy, one direct, both on a
   * prefix of this test's own, established.
   */
  private ShortMemory shortMemory() {
    ShortMemory fences =
        new ShortMemory(
            RedisFenceConfig.custom()
                .keyPrefix(keys.key("short-memory-fence:" + lock + ":"))
                .rememberedWrites(2)
                .build());
    fences.directly().establish(0);
    return fences;
  }

  private final class ShortMemory {
    private final RedisFenceConfig config;
    private final RedisFence throughProxy;
    private final RedisFence directly;

    ShortMemory(RedisFenceConfig config) {
      this.config = config;
      this.throughProxy = RedisFence.create(proxied, config);
      this.directly = RedisFence.create(direct, config);
    }

    RedisFence throughProxy() {
      return throughProxy;
    }

    RedisFence directly() {
      return directly;
    }

    /** The sequence number of the last applied write: the next one gets this plus one. */
    long lastSequence() {
      return Long.parseLong(Objects.requireNonNullElse(field("applied-seq"), "0"));
    }

    void twoMoreWritesOnAnotherLock() {
      for (int token = 1; token <= 2; token++) {
        assertThat(
                directly.write(
                    RedisFenceIT.lease(lock + "-other", "C", token), data("other"), "C" + token))
            .isEqualTo(Either.right(null));
      }
    }

    /** The fault fired: the write with sequence number {@code sequence} has no id remembered. */
    void assertForgotten(long sequence) {
      assertThat(lastSequence())
          .as("the first send and three more writes were applied")
          .isEqualTo(sequence + 3);
      assertThat(Long.parseLong(field("applied-oldest")))
          .as("the oldest remembered write id is after the one of write %d", sequence)
          .isGreaterThan(sequence);
      assertThat(field("applied-at:" + sequence)).as("write %d's id", sequence).isNull();
    }

    private String field(String name) {
      return direct.sync().hget(config.stateKey(), name);
    }
  }

  private static String outcomeOf(Supplier<Either<FenceRejection, Void>> write) {
    try {
      Either<FenceRejection, Void> result = write.get();
      return result.isRight() ? "written" : "refused: " + result.getLeft().describe();
    } catch (BackendUnavailableException e) {
      return "unknown: " + e.getMessage();
    }
  }

  private static boolean isFencedWrite(RedisCommand<?, ?, ?> command) {
    return command.getType() == CommandType.EVALSHA
        && command.getArgs().toCommandString().contains(Scripts.FENCED_WRITE.sha());
  }

  private static boolean isEval(RedisCommand<?, ?, ?> command) {
    return command.getType() == CommandType.EVAL;
  }

  private CompletableFuture<InjectedFault> armOnNextScript(
      FaultKind kind, Predicate<RedisCommand<?, ?, ?>> matches) {
    ArmedOnScript armed = new ArmedOnScript(kind, matches, new CompletableFuture<>());
    assertThat(armOnNextScript.compareAndSet(null, armed)).as("one fault at a time").isTrue();
    return armed.fault();
  }

  /**
   * Runs {@code write} through the proxy with the answer of its script dropped (the fenced write,
   * or the control's {@code EVAL}); while Lettuce cannot reconnect, runs {@code meanwhile} on the
   * direct connection; then lets the resend through.
   */
  private <T> T loseAnswerOf(Supplier<T> write, Runnable meanwhile) {
    CompletableFuture<InjectedFault> armed =
        armOnNextScript(
            FaultKind.ANSWER_LOST, command -> isFencedWrite(command) || isEval(command));
    CompletableFuture<T> result = CompletableFuture.supplyAsync(write);
    await("the answer was dropped")
        .atMost(Duration.ofSeconds(10))
        .pollInterval(Duration.ofMillis(2))
        .until(() -> armed.isDone() && armed.join().fired());
    InjectedFault fault = armed.join();
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
