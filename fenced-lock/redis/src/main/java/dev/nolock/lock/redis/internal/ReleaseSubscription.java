package dev.nolock.lock.redis.internal;

import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import java.time.Duration;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.BiConsumer;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The subscription to a lock prefix's release channel that wakes the acquires waiting in turn on
 * one {@code RedisLockBackend}: a Pub/Sub connection of its own, opened by the first wait.
 *
 * <p>Whether it {@link #wakes} is proven, not assumed: a connection that is open can still deliver
 * nothing (a {@code SUBSCRIBE} that is never answered, or refused again after a reconnect; an ACL
 * that lets the scripts' {@code PUBLISH} fail; a half-open TCP connection), and a waiter first in
 * line that nobody wakes would leave a freed lock idle for as long as it sleeps. So:
 *
 * <ol>
 *   <li>With each request to subscribe, each confirmation of a subscription, each time the
 *       connection is found open again after it was down, and every {@link #PROBE_EVERY} while
 *       waits go on, a probe message is published from the backend's own connection, as a release
 *       would be.
 *   <li>A probe not received within {@link #PROBE_TIMEOUT} (connecting included), or the connection
 *       down that long, ends the subscription: waiters are woken, find that it cannot wake them,
 *       and poll. The next wait tries again {@value #RETRY_SECONDS} s later, doubling with each
 *       failure in a row up to 64 times that, so a setting that never works costs a warning now and
 *       then.
 *   <li>A confirmation wakes every waiter once: releases may have gone unheard meanwhile.
 * </ol>
 *
 * Each attempt to subscribe is a generation; a failure, a probe or a callback of a generation that
 * has ended changes nothing. The connection is opened on a thread of its own, so that no acquire
 * waits for a connect. Thread-safe.
 */
public final class ReleaseSubscription {

  private static final Logger LOG = LoggerFactory.getLogger(ReleaseSubscription.class);
  private static final long NEVER = Long.MIN_VALUE;
  private static final int RETRY_SECONDS = 60;
  private static final Duration RETRY = Duration.ofSeconds(RETRY_SECONDS);
  private static final Duration PROBE_TIMEOUT = Duration.ofSeconds(5);
  private static final Duration PROBE_EVERY = Duration.ofSeconds(30);

  /** A waiting acquire: the lock it waits for and how to wake it. */
  public record Waiter(String name, Runnable wake) {}

  private final RedisClient client;
  private final StatefulRedisConnection<String, String> publisher;
  private final String channel;
  private final String probePrefix = "nolock-probe:" + UUID.randomUUID() + ":";
  private final Map<String, Waiter> waiting = new ConcurrentHashMap<>();
  private volatile StatefulRedisPubSubConnection<String, String> current;
  private volatile boolean closed;
  private volatile long failedAt = NEVER;
  private volatile long retryNanos = RETRY.toNanos();
  private volatile long probeSentAt = NEVER;
  private volatile long downSince = NEVER;
  private volatile long probesSent; // written under this
  private volatile long probesReceived; // written under this
  private boolean connecting; // guarded by this
  private long generation; // guarded by this
  private int failuresInARow; // guarded by this

  /**
   * @param client opens the Pub/Sub connection
   * @param publisher the backend's connection, which publishes the probes
   * @param channel the release channel
   */
  public ReleaseSubscription(
      RedisClient client, StatefulRedisConnection<String, String> publisher, String channel) {
    this.client = Objects.requireNonNull(client, "client");
    this.publisher = Objects.requireNonNull(publisher, "publisher");
    this.channel = Objects.requireNonNull(channel, "channel");
  }

  /**
   * Whether a wait can count on being woken: not closed, not failed within the retry window, no
   * probe overdue and the connection not down for long (either ends the subscription here), and the
   * connection open if there is one. Before the first wait there is none, and this is true: the
   * first wait opens it.
   */
  public boolean wakes() {
    if (closed) {
      return false;
    }
    long now = System.nanoTime();
    long failed = failedAt;
    if (failed != NEVER && now - failed < retryNanos) {
      return false;
    }
    if (probesReceived < probesSent && now - probeSentAt > PROBE_TIMEOUT.toNanos()) {
      return !failIfStill(now, "no probe came back within " + PROBE_TIMEOUT.toSeconds() + " s");
    }
    StatefulRedisPubSubConnection<String, String> connection = current;
    if (connection == null) {
      return true;
    }
    if (!connection.isOpen()) {
      long down = downSince;
      if (down == NEVER) {
        downSince = now;
      } else if (now - down > PROBE_TIMEOUT.toNanos()) {
        failIfStill(now, "its connection was down for " + PROBE_TIMEOUT.toSeconds() + " s");
      }
      return false;
    }
    if (downSince != NEVER) {
      // Open again (Lettuce reconnected): prove that it hears, whatever its resubscribe did.
      downSince = NEVER;
      probe(connection, true);
    } else if (probesReceived >= probesSent && now - probeSentAt > PROBE_EVERY.toNanos()) {
      probe(connection, false);
    }
    return true;
  }

  /**
   * Wakes {@code waiter.wake()} when a message names {@code id}, and once whenever the subscription
   * is confirmed or found not to work, until {@link #unregister}; opens the subscription if there
   * is none.
   *
   * @return false (and nothing registered) when there is none and none may be opened now
   */
  public boolean register(String id, Waiter waiter) {
    // Registered before subscribing: the confirmation that wakes every waiter may come at once.
    waiting.put(id, waiter);
    if (!subscribing()) {
      waiting.remove(id, waiter);
      return false;
    }
    return true;
  }

  public void unregister(String id, Waiter waiter) {
    waiting.remove(id, waiter);
  }

  /** Whether {@link #close} has begun: nothing may be sent for a wait from then on. */
  public boolean isClosed() {
    return closed;
  }

  /**
   * Ends the subscription, closing its connection first so that no release wakes a waiter of this
   * backend meanwhile, then gives each registered waiter's place up through {@code leave} (name,
   * waiter id). After the first {@code leave} that fails no other is tried: the server is likely
   * out of reach, each would wait its command timeout, and the places expire on their own.
   * Idempotent.
   */
  public void close(BiConsumer<String, String> leave) {
    StatefulRedisPubSubConnection<String, String> connection;
    synchronized (this) {
      closed = true;
      generation++;
      connection = current;
      current = null;
    }
    if (connection != null) {
      connection.close();
    }
    for (Map.Entry<String, Waiter> entry : waiting.entrySet()) {
      try {
        leave.accept(entry.getValue().name(), entry.getKey());
      } catch (RuntimeException e) {
        LOG.debug("Could not give up places on close; they expire on their own", e);
        return;
      }
    }
  }

  /** Wakes every registered waiter, e.g. once the backend's connection is closed. */
  public void wakeAll() {
    waiting.values().forEach(waiter -> waiter.wake().run());
  }

  private synchronized boolean subscribing() {
    if (closed) {
      return false;
    }
    if (current != null || connecting) {
      return true;
    }
    long failed = failedAt;
    if (failed != NEVER && System.nanoTime() - failed < retryNanos) {
      return false;
    }
    connecting = true;
    long mine = ++generation;
    downSince = NEVER;
    // The first probe's deadline counts from the request: a connect that never completes fails.
    probeSentAt = System.nanoTime();
    probesSent++;
    Thread opener = new Thread(() -> open(mine), "nolock-redis-release-subscription");
    opener.setDaemon(true);
    opener.start();
    return true;
  }

  private void open(long mine) {
    StatefulRedisPubSubConnection<String, String> opened;
    try {
      opened = client.connectPubSub();
    } catch (RuntimeException e) {
      failed(mine, e.toString());
      return;
    }
    synchronized (this) {
      if (closed || generation != mine) {
        opened.closeAsync();
        return;
      }
      connecting = false;
      opened.addListener(new Listener(opened));
      current = opened;
    }
    opened
        .async()
        .subscribe(channel)
        .whenComplete(
            (ok, failure) -> {
              if (failure != null) {
                failed(mine, failure.toString());
              }
            });
  }

  /**
   * Publishes a probe while {@code connection} is the subscription, unless one is in flight and
   * this is not {@code fresh} (a confirmation of the subscription, or a reconnect: what was
   * published before it was not heard).
   */
  private synchronized void probe(
      StatefulRedisPubSubConnection<String, String> connection, boolean fresh) {
    if (closed || connection != current || (!fresh && probesReceived < probesSent)) {
      return;
    }
    probeSentAt = System.nanoTime();
    long sequence = ++probesSent;
    // A failed publish is answered by the deadline, like a lost one.
    publisher.async().publish(channel, probePrefix + sequence);
  }

  private synchronized void received(long sequence) {
    if (sequence > probesReceived && sequence <= probesSent) {
      probesReceived = sequence;
      failuresInARow = 0;
    }
  }

  /** {@link #failed} for the generation still running, if the probe is still overdue. */
  private boolean failIfStill(long now, String reason) {
    long seen;
    synchronized (this) {
      boolean overdue = probesReceived < probesSent && now - probeSentAt > PROBE_TIMEOUT.toNanos();
      boolean down = downSince != NEVER && now - downSince > PROBE_TIMEOUT.toNanos();
      if (!overdue && !down) {
        return false;
      }
      seen = generation;
    }
    return failed(seen, reason);
  }

  /**
   * Generation {@code seen} of the subscription cannot be counted on: end it (closing whatever
   * connection it has), wake every waiter (they find that it cannot wake them, and poll) and wait
   * the retry window before another is opened. A failure of a generation that has ended, or after
   * close, changes nothing.
   *
   * @return whether this call ended it
   */
  private boolean failed(long seen, String reason) {
    StatefulRedisPubSubConnection<String, String> connection;
    long retrySeconds;
    synchronized (this) {
      if (closed || generation != seen) {
        return false;
      }
      generation++;
      connecting = false;
      connection = current;
      current = null;
      downSince = NEVER;
      probesReceived = probesSent;
      retryNanos = RETRY.toNanos() << Math.min(failuresInARow, 6);
      failuresInARow++;
      failedAt = System.nanoTime();
      retrySeconds = retryNanos / 1_000_000_000L;
    }
    if (connection != null) {
      connection.closeAsync();
    }
    wakeAll();
    LOG.warn(
        "The subscription to {} wakes no waiter ({}); waiting acquires poll with the lock's backoff"
            + " instead, and a subscription is tried again in {} s. Behind a proxy without"
            + " Pub/Sub, or with an ACL that does not allow the channel (&{}) or PUBLISH, this is"
            + " expected.",
        channel,
        reason,
        retrySeconds,
        channel);
    return true;
  }

  private final class Listener extends RedisPubSubAdapter<String, String> {
    private final StatefulRedisPubSubConnection<String, String> connection;

    Listener(StatefulRedisPubSubConnection<String, String> connection) {
      this.connection = connection;
    }

    @Override
    public void message(String from, String message) {
      if (message.startsWith(probePrefix)) {
        received(Long.parseLong(message.substring(probePrefix.length())));
        return;
      }
      Waiter waiter = waiting.get(message);
      if (waiter != null) {
        waiter.wake().run();
      }
    }

    @Override
    public void subscribed(String to, long count) {
      probe(connection, true);
      wakeAll();
    }
  }
}
