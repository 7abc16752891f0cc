package dev.nolock.lock.redis.internal;

import io.lettuce.core.RedisClient;
import io.lettuce.core.api.StatefulRedisConnection;
import io.lettuce.core.pubsub.RedisPubSubAdapter;
import io.lettuce.core.pubsub.StatefulRedisPubSubConnection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
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
 *   <li>With each request to subscribe, each confirmation of a subscription (the first, and each
 *       after Lettuce reconnected) and then every {@link #PROBE_EVERY} while waits go on, a probe
 *       message is published from the backend's own connection, as a release would be.
 *   <li>A probe not received within {@link #PROBE_TIMEOUT} (connecting included) ends the
 *       subscription: waiters are woken, find that it cannot wake them, and poll. The next wait
 *       tries again {@value #RETRY_SECONDS} s later, doubling with each failure in a row up to 64
 *       times that, so a setting that never works costs a warning now and then.
 *   <li>A confirmation wakes every waiter once: releases may have gone unheard meanwhile.
 * </ol>
 *
 * The connection is opened on a thread of its own, so that no acquire waits for a connect.
 * Thread-safe.
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
  private final AtomicLong probesSent = new AtomicLong();
  private final AtomicLong probesReceived = new AtomicLong();
  private volatile long probeSentAt = NEVER;
  private volatile StatefulRedisPubSubConnection<String, String> current;
  private volatile long failedAt = NEVER;
  private volatile long retryNanos = RETRY.toNanos();
  private volatile boolean closed;
  private boolean connecting; // guarded by this
  private long generation; // guarded by this; each request to subscribe and each failure moves it
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
   * probe overdue (one overdue ends the subscription here), and the connection open if there is
   * one. Before the first wait there is none, and this is true: the first wait opens it.
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
    StatefulRedisPubSubConnection<String, String> connection = current;
    boolean awaiting = probesReceived.get() < probesSent.get();
    if (awaiting && now - probeSentAt > PROBE_TIMEOUT.toNanos()) {
      failed(connection, "no message came back within " + PROBE_TIMEOUT.toSeconds() + " s");
      return false;
    }
    if (connection == null) {
      return true;
    }
    if (!connection.isOpen()) {
      return false;
    }
    if (!awaiting && now - probeSentAt > PROBE_EVERY.toNanos()) {
      probe(false);
    }
    return true;
  }

  /**
   * Wakes {@code waiter.wake()} when a message names {@code id}, and once whenever the subscription
   * is confirmed, until {@link #unregister}; opens the subscription if there is none.
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

  /**
   * Ends the subscription: gives each registered waiter's place up through {@code leave} (name,
   * waiter id; failures ignored: the place then expires) and closes the connection. Idempotent.
   *
   * @return how to wake those waiters: only once the caller closed the connection their next
   *     attempt would go through, or a woken waiter could take its place again meanwhile
   */
  public List<Runnable> close(BiConsumer<String, String> leave) {
    StatefulRedisPubSubConnection<String, String> connection;
    synchronized (this) {
      closed = true;
      generation++;
      connection = current;
      current = null;
    }
    List<Runnable> wakes = new ArrayList<>();
    waiting.forEach(
        (id, waiter) -> {
          try {
            leave.accept(waiter.name(), id);
          } catch (RuntimeException e) {
            LOG.debug("Could not leave the queue of {} on close; the place expires", waiter, e);
          }
          wakes.add(waiter.wake());
        });
    if (connection != null) {
      connection.close();
    }
    return wakes;
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
    // The first probe's deadline counts from the request: a connect that never completes fails.
    probeSentAt = System.nanoTime();
    probesSent.incrementAndGet();
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
      synchronized (this) {
        if (generation != mine) {
          return;
        }
        connecting = false;
      }
      failed(null, e.toString());
      return;
    }
    synchronized (this) {
      connecting = false;
      if (closed || generation != mine) {
        opened.closeAsync();
        return;
      }
      opened.addListener(new Listener());
      current = opened;
    }
    opened
        .async()
        .subscribe(channel)
        .whenComplete(
            (ok, failure) -> {
              if (failure != null) {
                failed(opened, failure.toString());
              }
            });
  }

  /**
   * Publishes a probe, unless one is in flight and this is not {@code fresh} (a confirmation of the
   * subscription: what was published before it was not heard).
   */
  private synchronized void probe(boolean fresh) {
    if (!fresh && probesReceived.get() < probesSent.get()) {
      return; // one at a time; the one in flight has its own deadline
    }
    probeSentAt = System.nanoTime();
    long sequence = probesSent.incrementAndGet();
    // A failed publish is answered by the deadline, like a lost one.
    publisher.async().publish(channel, probePrefix + sequence);
  }

  private synchronized void received(long sequence) {
    probesReceived.accumulateAndGet(sequence, Math::max);
    failuresInARow = 0;
  }

  /**
   * The subscription cannot be counted on: end it, wake every waiter (they find that it cannot wake
   * them, and poll) and wait the retry window before another is opened. A late failure of a
   * connection already replaced, or after close, changes nothing.
   */
  private void failed(StatefulRedisPubSubConnection<String, String> connection, String reason) {
    long retrySeconds;
    synchronized (this) {
      if (closed || (connection != null && connection != current)) {
        return;
      }
      generation++;
      connecting = false;
      current = null;
      probesReceived.set(probesSent.get());
      retryNanos = RETRY.toNanos() << Math.min(failuresInARow, 6);
      failuresInARow++;
      failedAt = System.nanoTime();
      retrySeconds = retryNanos / 1_000_000_000L;
    }
    if (connection != null) {
      connection.closeAsync();
    }
    waiting.values().forEach(waiter -> waiter.wake().run());
    LOG.warn(
        "The subscription to {} wakes no waiter ({}); waiting acquires poll with the lock's backoff"
            + " instead, and a subscription is tried again in {} s. Behind a proxy without"
            + " Pub/Sub, or with an ACL that does not allow the channel (&{}), this is expected.",
        channel,
        reason,
        retrySeconds,
        channel);
  }

  private final class Listener extends RedisPubSubAdapter<String, String> {
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
      probe(true);
      waiting.values().forEach(waiter -> waiter.wake().run());
    }
  }
}
