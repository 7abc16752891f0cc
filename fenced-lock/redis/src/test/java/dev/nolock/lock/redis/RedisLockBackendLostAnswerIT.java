package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.lock.redis.internal.LuaScript;
import dev.nolock.lock.redis.internal.Scripts;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.FaultKind;
import dev.nolock.testkit.InjectedFault;
import dev.nolock.testkit.LockBackendLostAnswerContract;
import dev.nolock.testkit.RedisExtension;
import dev.nolock.testkit.RedisKeys;
import dev.nolock.testkit.TcpProxy;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.api.sync.RedisCommands;
import io.lettuce.core.event.command.CommandListener;
import io.lettuce.core.event.command.CommandStartedEvent;
import io.lettuce.core.protocol.CommandType;
import io.lettuce.core.protocol.RedisCommand;
import io.lettuce.core.resource.ClientResources;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The lost-answer contract against the real Redis. Owner A's backend reaches Redis through a {@link
 * TcpProxy} on a connection of its own; {@link TcpProxy#loseNext(FaultKind, Runnable)} drops the
 * answer of its next script (or the script itself) and the connection with it, and Lettuce
 * (auto-reconnect, its default) reconnects and sends the script again by itself, as it does in
 * production. Owner B and the peek go straight to Redis.
 *
 * <p>Targeting: the scripts are loaded before any case runs, so every call is one {@code EVALSHA}
 * and no {@code NOSCRIPT} answer can take the fault; a command listener on A's client records the
 * first script A starts after a fault is armed, and the fault counts as fired only if that was the
 * script of the operation the case means.
 */
@ExtendWith(RedisExtension.class)
class RedisLockBackendLostAnswerIT extends LockBackendLostAnswerContract {

  /** Longer than any meanwhile action of the contract (a TTL wait and its round trips). */
  private static final Duration COMMAND_TIMEOUT = Duration.ofSeconds(10);

  private static ClientResources resources;
  private static StatefulRedisConnection<String, String> direct;
  private static RedisCommands<String, String> redis;
  private static RedisLockBackend backend;

  private final TcpProxy proxy;
  private final RedisClient proxiedClient;
  private final StatefulRedisConnection<String, String> proxied;
  private final RedisLockBackend faulty;
  private final AtomicReference<Armed> armed = new AtomicReference<>();

  @BeforeAll
  static void connect(RedisClient client, RedisKeys keys) {
    resources = ClientResources.create();
    direct = client.connect();
    redis = direct.sync();
    backend =
        RedisLockBackend.create(
            direct, RedisLockBackendConfig.custom().keyPrefix(keys.key("lock:")).build());
    // Cached on the server before any fault is armed: a NOSCRIPT answer must never take it.
    for (LuaScript script : List.of(Scripts.ACQUIRE, Scripts.RENEW, Scripts.RELEASE)) {
      redis.scriptLoad(script.source());
    }
  }

  @AfterAll
  static void disconnect() {
    direct.close();
    resources.shutdown();
  }

  RedisLockBackendLostAnswerIT(RedisURI uri) {
    proxy = TcpProxy.start(uri.getHost(), uri.getPort());
    RedisURI throughProxy = RedisURI.builder(uri).withPort(proxy.port()).build();
    throughProxy.setTimeout(COMMAND_TIMEOUT);
    proxiedClient = RedisClient.create(resources, throughProxy);
    proxiedClient.addListener(
        new CommandListener() {
          @Override
          public void commandStarted(CommandStartedEvent event) {
            Armed fault = armed.get();
            if (fault != null && isScript(event.getCommand())) {
              fault.firstScript.compareAndSet(null, event.getCommand().getArgs().toCommandString());
            }
          }
        });
    proxied = proxiedClient.connect();
    faulty = RedisLockBackend.create(proxied, backend.config());
  }

  @AfterEach
  void closeProxy() {
    proxied.close();
    proxiedClient.shutdown(Duration.ZERO, Duration.ofSeconds(1));
    proxy.close();
  }

  @Override
  protected LockBackend backend() {
    return backend;
  }

  @Override
  protected LockBackend faultyBackend() {
    return faulty;
  }

  @Override
  protected Option<ObservedLease> peek(String name) {
    return RedisLockBackendIT.peek(redis, backend.config().leaseKey(name));
  }

  @Override
  protected InjectedFault inject(Operation op, FaultKind kind, Runnable meanwhile) {
    Armed fault = new Armed(op, proxy.loseNext(kind, meanwhile));
    Armed previous = armed.getAndSet(fault);
    assertThat(previous == null || previous.fired())
        .as("one fault at a time: %s is still armed", previous)
        .isTrue();
    return fault;
  }

  /**
   * No answer within the command timeout: the command is cancelled and the call is unknown, never a
   * refusal or false. The proxy holds every byte back (a partition that heals later), so whether
   * the server ran the script is indeed unknown when the call returns.
   */
  @Test
  void aScriptWithoutAnAnswerWithinTheCommandTimeoutIsUnknownNeverARefusal(RedisURI uri) {
    RedisURI throughProxy = RedisURI.builder(uri).withPort(proxy.port()).build();
    throughProxy.setTimeout(Duration.ofMillis(300));
    RedisClient impatientClient = RedisClient.create(resources, throughProxy);
    try (StatefulRedisConnection<String, String> impatient = impatientClient.connect()) {
      RedisLockBackend slow = RedisLockBackend.create(impatient, backend.config());
      String name = name("timeout");
      FencingToken token = slow.tryAcquire(name, "A", ttl()).get();

      proxy.freeze();
      try {
        assertThatThrownBy(() -> slow.tryAcquire(name("timeout-free"), "A", ttl()))
            .as("an acquire without an answer")
            .isInstanceOf(BackendUnavailableException.class)
            .hasMessageContaining("unknown");
        assertThatThrownBy(() -> slow.renew(name, "A", token, ttl()))
            .as("a renew without an answer")
            .isInstanceOf(BackendUnavailableException.class)
            .hasMessageContaining("unknown");
        assertThatThrownBy(() -> slow.release(name, "A", token))
            .as("a release without an answer")
            .isInstanceOf(BackendUnavailableException.class)
            .hasMessageContaining("unknown");
      } finally {
        proxy.unfreeze();
      }

      // Negative control: the same backend answers again once bytes flow.
      assertThat(slow.tryAcquire(name("timeout-after"), "A", ttl()).isDefined())
          .as("an acquire of a free name once the proxy lets bytes through")
          .isTrue();
    } finally {
      impatientClient.shutdown(Duration.ZERO, Duration.ofSeconds(1));
    }
  }

  private static boolean isScript(RedisCommand<?, ?, ?> command) {
    return command.getType() == CommandType.EVALSHA || command.getType() == CommandType.EVAL;
  }

  private static LuaScript scriptOf(Operation op) {
    return switch (op) {
      case ACQUIRE -> Scripts.ACQUIRE;
      case RENEW -> Scripts.RENEW;
      case RELEASE -> Scripts.RELEASE;
    };
  }

  /**
   * The proxy's fault, which counts as fired only if the first script A started after arming was
   * the {@code EVALSHA} of {@code op}'s script: the dropped bytes were that call's.
   */
  private static final class Armed implements InjectedFault {
    final Operation op;
    final InjectedFault loss;
    final AtomicReference<String> firstScript = new AtomicReference<>();

    Armed(Operation op, InjectedFault loss) {
      this.op = op;
      this.loss = loss;
    }

    @Override
    public boolean fired() {
      String first = firstScript.get();
      return loss.fired() && first != null && first.startsWith(scriptOf(op).sha());
    }

    @Override
    public void assertFired() {
      loss.assertFired();
      InjectedFault.super.assertFired();
    }

    @Override
    public String toString() {
      return loss
          + " of the "
          + op
          + " script (sha "
          + scriptOf(op).sha()
          + "); the first script sent after arming was "
          + Optional.ofNullable(firstScript.get()).orElse("none");
    }
  }
}
