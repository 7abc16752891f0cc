package dev.nolock.lock.etcd;

import dev.nolock.testkit.ArmedFault;
import dev.nolock.testkit.Endpoints;
import dev.nolock.testkit.FaultKind;
import io.etcd.jetcd.Client;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.net.URI;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.BiPredicate;
import java.util.function.Predicate;

/**
 * A jetcd {@link Client} whose gRPC calls lose one request or one answer on purpose, against the
 * real etcd: the fault a client meets when its connection drops mid-call. gRPC multiplexes every
 * call on one HTTP/2 connection, so a socket proxy cannot aim at one RPC; this is a {@link
 * ClientInterceptor} on the client's channel instead, which is below jetcd's own retry: each
 * attempt jetcd makes goes through it, so jetcd decides what happens next, as it would in
 * production.
 *
 * <p>What jetcd 0.8 does after {@code UNAVAILABLE} (its {@code Impl.execute} retries with Failsafe
 * while {@code Errors.isRetryableFor*} says so, up to {@code retryMaxAttempts} (2) times with a
 * back-off of {@code retryDelay}..{@code retryMaxDelay}):
 *
 * <ul>
 *   <li>{@code KV/Txn} with {@code TxnOption.DEFAULT} (no auto-retry, what {@link EtcdLockBackend}
 *       sends): not resent, the future fails with an {@code EtcdException} of code {@code
 *       UNAVAILABLE}. A transaction is not idempotent, so jetcd leaves the decision to the caller.
 *   <li>{@code Lease/LeaseGrant} and {@code Lease/LeaseRevoke} (auto-retry): resent; a lost grant
 *       answer thus grants a second lease, the first one expiring unused.
 *   <li>{@code Lease/LeaseKeepAlive} through {@code keepAliveOnce}: not resent, the future fails
 *       with that {@code UNAVAILABLE}. (An expired lease is answered with TTL 0, which jetcd turns
 *       into an {@code EtcdException} of code {@code NOT_FOUND}.)
 * </ul>
 *
 * <p>Guarantees, in order:
 *
 * <ol>
 *   <li>{@link #client()} goes to the real etcd; every call passes untouched except the one a fault
 *       is armed for.
 *   <li>{@link #onNext} arms a fault for the next request message of one gRPC method (e.g. {@link
 *       #TXN}) that a predicate accepts. It fires once, on the first such message sent after
 *       arming:
 *       <ul>
 *         <li>{@link FaultKind#ANSWER_LOST}: the request is sent; when etcd's answer arrives (it
 *             has applied the request), the answer is dropped and the call cancelled, {@code
 *             meanwhile} runs, and then the caller's call fails with {@code UNAVAILABLE}, as a
 *             connection that dropped after etcd wrote its answer would.
 *         <li>{@link FaultKind#REQUEST_LOST}: the message is never sent; {@code meanwhile} runs,
 *             the call is cancelled (etcd saw at most an empty stream) and fails with {@code
 *             UNAVAILABLE}.
 *       </ul>
 *   <li>{@code meanwhile} runs on a thread of its own while the caller still waits, so it may use
 *       this very client (the fault has fired by then); it must end within the caller's own
 *       timeout.
 *   <li>A fault counts the {@linkplain ArmedFault#attempts() messages} it matched from the moment
 *       it was armed, the lost one included: the resends of jetcd's retry show up there.
 * </ol>
 *
 * <p>Thread-safe. Close it after the test: it closes the client.
 */
final class EtcdFaults implements AutoCloseable {

  static final String TXN = "etcdserverpb.KV/Txn";
  static final String LEASE_GRANT = "etcdserverpb.Lease/LeaseGrant";
  static final String LEASE_KEEP_ALIVE = "etcdserverpb.Lease/LeaseKeepAlive";
  static final String LEASE_REVOKE = "etcdserverpb.Lease/LeaseRevoke";

  private final List<ArmedFault<Sent>> armed = new CopyOnWriteArrayList<>();
  private final Client client;

  EtcdFaults(Endpoints endpoints) {
    URI[] uris =
        Arrays.stream(endpoints.etcdEndpoint().split(","))
            .map(String::trim)
            .map(URI::create)
            .toArray(URI[]::new);
    this.client =
        Client.builder()
            .endpoints(uris)
            .connectTimeout(Duration.ofSeconds(5))
            .interceptor(new Losing())
            .build();
  }

  /** The client whose calls go through the faults; it stays this object's, do not close it. */
  Client client() {
    return client;
  }

  /** Arms {@code kind} for the next request message that {@code request} matches. */
  ArmedFault<Sent> onNext(Request request, FaultKind kind, Runnable meanwhile) {
    Objects.requireNonNull(request, "request");
    ArmedFault<Sent> fault =
        new ArmedFault<>(
            request.what(),
            sent -> request.accepts().test(sent.method(), sent.message()),
            kind,
            meanwhile);
    armed.add(fault);
    return fault;
  }

  /** A request message on its way to etcd, and the full name of its gRPC method. */
  record Sent(String method, Object message) {}

  /**
   * Request messages a fault is armed for.
   *
   * @param what names them in the fault's messages
   * @param accepts takes the full gRPC method name (e.g. {@link #TXN}) and the request message
   */
  record Request(String what, BiPredicate<String, Object> accepts) {

    /** The messages of {@code method} that {@code message} accepts. */
    static Request of(String method, String what, Predicate<Object> message) {
      return new Request(what, (m, request) -> m.equals(method) && message.test(request));
    }

    /** These messages or {@code other}'s. */
    Request or(Request other) {
      return new Request(
          what + " or " + other.what,
          (m, request) -> accepts.test(m, request) || other.accepts.test(m, request));
    }

    @Override
    public String toString() {
      return what;
    }
  }

  @Override
  public void close() {
    client.close();
  }

  @Override
  public String toString() {
    return "EtcdFaults" + armed;
  }

  private final class Losing implements ClientInterceptor {
    @Override
    public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(
        MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
      return new LosingCall<>(method.getFullMethodName(), next.newCall(method, options));
    }
  }

  private enum State {
    /** No fault on this call. */
    CLEAN,
    /** The request was sent; its answer will be lost. */
    ANSWER_PENDING,
    /** The answer was dropped (or the request never sent): the call is dead to its caller. */
    LOST
  }

  /**
   * One call. Its caller-side methods are serialised by the caller (gRPC's rule); the fault's own
   * thread only cancels the real call and, once the real call closed, closes the caller's listener.
   */
  private final class LosingCall<ReqT, RespT> extends ClientCall<ReqT, RespT> {
    private final String method;
    private final ClientCall<ReqT, RespT> real;
    private final AtomicReference<State> state = new AtomicReference<>(State.CLEAN);
    private final CompletableFuture<Void> realClosed = new CompletableFuture<>();
    private volatile ArmedFault<Sent> fault;
    private Listener<RespT> listener;

    LosingCall(String method, ClientCall<ReqT, RespT> real) {
      this.method = method;
      this.real = real;
    }

    @Override
    public void start(Listener<RespT> listener, Metadata headers) {
      this.listener = listener;
      real.start(new Watching(), headers);
    }

    @Override
    public void request(int messages) {
      real.request(messages);
    }

    @Override
    public synchronized void cancel(String message, Throwable cause) {
      real.cancel(message, cause);
    }

    @Override
    public synchronized void halfClose() {
      if (state.get() != State.LOST) {
        real.halfClose();
      }
    }

    @Override
    public synchronized void sendMessage(ReqT message) {
      switch (state.get()) {
        case LOST -> {} // the connection is gone: nothing more reaches etcd
        case ANSWER_PENDING -> real.sendMessage(message);
        case CLEAN -> {
          ArmedFault<Sent> fired = ArmedFault.fireFirst(armed, new Sent(method, message));
          if (fired == null) {
            real.sendMessage(message);
          } else if (fired.kind() == FaultKind.ANSWER_LOST) {
            fault = fired;
            state.set(State.ANSWER_PENDING);
            real.sendMessage(message);
          } else {
            fault = fired;
            state.set(State.LOST);
            lose(" before etcd saw the request");
          }
        }
      }
    }

    @Override
    public boolean isReady() {
      return real.isReady();
    }

    @Override
    public void setMessageCompression(boolean enabled) {
      real.setMessageCompression(enabled);
    }

    /**
     * On the fault's own thread: runs {@code meanwhile}, cancels the real call, waits until it
     * closed (its last callback), then fails the caller's call as a dropped connection would.
     */
    private void lose(String where) {
      ArmedFault<Sent> lost = fault;
      Thread thread =
          new Thread(
              () -> {
                Throwable failed = null;
                try {
                  lost.meanwhile().run();
                } catch (Throwable e) {
                  failed = e;
                }
                synchronized (this) {
                  real.cancel("EtcdFaults: connection dropped", null);
                }
                realClosed.join();
                listener.onClose(
                    Status.UNAVAILABLE
                        .withDescription("EtcdFaults: connection reset, " + lost + where + ")")
                        .withCause(failed),
                    new Metadata());
              },
              "etcd-faults");
      thread.setDaemon(true);
      thread.start();
    }

    /** The real call's callbacks, passed on unless the call's answer is being lost. */
    private final class Watching extends Listener<RespT> {
      @Override
      public void onHeaders(Metadata headers) {
        if (state.get() != State.LOST) {
          listener.onHeaders(headers);
        }
      }

      @Override
      public void onMessage(RespT message) {
        if (state.compareAndSet(State.ANSWER_PENDING, State.LOST)) {
          lose(" after etcd applied the request; its answer was dropped");
        } else if (state.get() == State.CLEAN) {
          listener.onMessage(message);
        }
      }

      @Override
      public void onReady() {
        if (state.get() != State.LOST) {
          listener.onReady();
        }
      }

      @Override
      public void onClose(Status status, Metadata trailers) {
        if (state.get() == State.LOST) {
          realClosed.complete(null);
        } else {
          // A call that closed before its armed answer came (etcd refused it) keeps its own end.
          listener.onClose(status, trailers);
        }
      }
    }
  }
}
