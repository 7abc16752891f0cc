package dev.nolock.lock.etcd;

import io.etcd.jetcd.api.LeaseKeepAliveResponse;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ClientCall;
import io.grpc.ClientInterceptor;
import io.grpc.ForwardingClientCall.SimpleForwardingClientCall;
import io.grpc.ForwardingClientCallListener.SimpleForwardingClientCallListener;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.Status;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Watches every {@code Lease/LeaseKeepAlive} call of a jetcd client (what {@code keepAliveOnce}
 * sends) and records each one that ended with an error status before etcd's answer: the keep-alive
 * failures a test caused for real (a leader change, a frozen or killed member).
 *
 * <p>With {@code failuresAnswerExpired}, such a failure reaches jetcd as etcd's answer for an
 * expired lease instead (TTL 0, which jetcd reports as {@code NOT_FOUND}): the classification of a
 * backend that takes every keep-alive failure for a lost lease, the negative control.
 */
final class KeepAliveFailures implements ClientInterceptor {

  private static final String LEASE_KEEP_ALIVE = "etcdserverpb.Lease/LeaseKeepAlive";

  private final boolean failuresAnswerExpired;
  private final List<Status> failures = new CopyOnWriteArrayList<>();
  private final AtomicInteger answers = new AtomicInteger();
  private final AtomicReference<Hold> held = new AtomicReference<>();

  KeepAliveFailures(boolean failuresAnswerExpired) {
    this.failuresAnswerExpired = failuresAnswerExpired;
  }

  /** The error statuses of the keep-alive calls that failed before an answer, in order. */
  List<Status> failures() {
    return List.copyOf(failures);
  }

  /**
   * Holds the next keep-alive call back, before it opens its stream, while {@code meanwhile} runs
   * on a thread of its own; then lets it go as it came. The returned future completes when it went
   * (exceptionally if {@code meanwhile} threw, the call going all the same).
   */
  CompletableFuture<Void> holdNext(Runnable meanwhile) {
    CompletableFuture<Void> released = new CompletableFuture<>();
    if (!held.compareAndSet(null, new Hold(meanwhile, released))) {
      throw new IllegalStateException("a keep-alive is already held");
    }
    return released;
  }

  private record Hold(Runnable meanwhile, CompletableFuture<Void> released) {}

  /** How many keep-alive calls etcd answered so far. */
  int answers() {
    return answers.get();
  }

  @Override
  public <ReqT, RespT> ClientCall<ReqT, RespT> interceptCall(
      MethodDescriptor<ReqT, RespT> method, CallOptions options, Channel next) {
    ClientCall<ReqT, RespT> call = next.newCall(method, options);
    if (!method.getFullMethodName().equals(LEASE_KEEP_ALIVE)) {
      return call;
    }
    ClientCall<ReqT, RespT> watched = watched(call);
    Hold hold = held.getAndSet(null);
    return hold == null ? watched : new HeldCall<>(watched, hold);
  }

  private <ReqT, RespT> ClientCall<ReqT, RespT> watched(ClientCall<ReqT, RespT> call) {
    return new SimpleForwardingClientCall<>(call) {
      @Override
      public void start(Listener<RespT> listener, Metadata headers) {
        super.start(
            new SimpleForwardingClientCallListener<>(listener) {
              private boolean answered;

              @Override
              public void onMessage(RespT message) {
                answered = true;
                answers.incrementAndGet();
                super.onMessage(message);
              }

              @Override
              public void onClose(Status status, Metadata trailers) {
                // CANCELLED is jetcd ending the stream itself, after an answer or a timeout.
                if (answered || status.isOk() || status.getCode() == Status.Code.CANCELLED) {
                  super.onClose(status, trailers);
                  return;
                }
                failures.add(status);
                if (failuresAnswerExpired) {
                  @SuppressWarnings("unchecked")
                  RespT expired = (RespT) LeaseKeepAliveResponse.newBuilder().setTTL(0).build();
                  super.onMessage(expired);
                  super.onClose(Status.OK, new Metadata());
                } else {
                  super.onClose(status, trailers);
                }
              }
            },
            headers);
      }
    };
  }

  /**
   * A call whose every method is queued until its hold's {@code meanwhile} ran, then replayed in
   * order: gRPC picks the member and opens the stream only then.
   */
  private static final class HeldCall<ReqT, RespT> extends ClientCall<ReqT, RespT> {
    private final ClientCall<ReqT, RespT> real;
    private final List<Runnable> queued = new ArrayList<>();
    private boolean holding = true;

    HeldCall(ClientCall<ReqT, RespT> real, Hold hold) {
      this.real = real;
      Thread thread =
          new Thread(
              () -> {
                Throwable failed = null;
                try {
                  hold.meanwhile().run();
                } catch (Throwable e) {
                  failed = e;
                }
                synchronized (this) {
                  queued.forEach(Runnable::run);
                  queued.clear();
                  holding = false;
                }
                if (failed == null) {
                  hold.released().complete(null);
                } else {
                  hold.released().completeExceptionally(failed);
                }
              },
              "keep-alive-hold");
      thread.setDaemon(true);
      thread.start();
    }

    private synchronized void run(Runnable op) {
      if (holding) {
        queued.add(op);
      } else {
        op.run();
      }
    }

    @Override
    public void start(Listener<RespT> listener, Metadata headers) {
      run(() -> real.start(listener, headers));
    }

    @Override
    public void request(int messages) {
      run(() -> real.request(messages));
    }

    @Override
    public void cancel(String message, Throwable cause) {
      run(() -> real.cancel(message, cause));
    }

    @Override
    public void halfClose() {
      run(real::halfClose);
    }

    @Override
    public void sendMessage(ReqT message) {
      run(() -> real.sendMessage(message));
    }

    @Override
    public synchronized boolean isReady() {
      return !holding && real.isReady();
    }
  }
}
