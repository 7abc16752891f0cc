package dev.nolock.lock.redis;

import dev.nolock.patterns.FencingToken;
import io.lettuce.core.RedisClient;
import io.lettuce.core.RedisURI;
import io.lettuce.core.ScriptOutputType;
import io.lettuce.core.SetArgs;
import io.lettuce.core.api.StatefulRedisConnection;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

/**
 * Redlock as its description gives it, for the scenario that shows what it does not buy: lock a
 * majority of N independent instances with {@code SET NX PX}, and count the lock valid for the TTL
 * minus the time the acquisition took minus a drift allowance.
 *
 * <p>Redlock hands out no fencing token. So that the scenario can show the fence at work, each
 * acquisition also {@code INCR}s a counter on every instance it locked and takes the largest value.
 * That is monotonic here only because all five instances answer every time: two majorities share an
 * instance but not necessarily its largest counter, so in general it is <b>not</b> a fencing token.
 * nolock does not ship Redlock for this reason; this class lives in the tests.
 */
final class Redlock implements AutoCloseable {

  private static final double CLOCK_DRIFT_FACTOR = 0.01;

  /** A majority grant: its value, a token and the moment (nanoTime) its validity ends. */
  record Grant(String value, FencingToken token, long validUntilNanos) {}

  private final List<RedisClient> clients = new ArrayList<>();
  private final List<StatefulRedisConnection<String, String>> connections = new ArrayList<>();

  Redlock(List<Integer> ports) {
    for (int port : ports) {
      RedisClient client =
          RedisClient.create(
              RedisURI.Builder.redis("127.0.0.1", port).withTimeout(Duration.ofSeconds(1)).build());
      clients.add(client);
      connections.add(client.connect());
    }
  }

  Option<Grant> tryLock(String name, Duration ttl) {
    String value = UUID.randomUUID().toString();
    long start = System.nanoTime();
    int locked = 0;
    long token = 0;
    for (StatefulRedisConnection<String, String> c : connections) {
      try {
        if ("OK".equals(c.sync().set(name, value, SetArgs.Builder.nx().px(ttl.toMillis())))) {
          locked++;
          token = Math.max(token, c.sync().incr(name + ":token"));
        }
      } catch (RuntimeException unreachable) {
        // an instance that does not answer counts as not locked
      }
    }
    long elapsed = System.nanoTime() - start;
    long drift = (long) (ttl.toNanos() * CLOCK_DRIFT_FACTOR) + 2_000_000;
    long validity = ttl.toNanos() - elapsed - drift;
    if (locked >= connections.size() / 2 + 1 && validity > 0) {
      return Option.some(new Grant(value, FencingToken.of(token), start + validity));
    }
    unlock(name, value);
    return Option.none();
  }

  void unlock(String name, String value) {
    for (StatefulRedisConnection<String, String> c : connections) {
      try {
        c.sync()
            .eval(
                "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1])"
                    + " else return 0 end",
                ScriptOutputType.INTEGER,
                new String[] {name},
                value);
      } catch (RuntimeException unreachable) {
        // best effort, as in the algorithm
      }
    }
  }

  @Override
  public void close() {
    connections.forEach(StatefulRedisConnection::close);
    clients.forEach(c -> c.shutdown(Duration.ZERO, Duration.ofSeconds(1)));
  }
}
