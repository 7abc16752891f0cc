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
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Watches every {@code Lease/LeaseKeepAlive} call of a jetcd client (what {@code keepAliveOnce}
 * sends) and records each one that ended with an error status before etcd's answer: the
 * keep-alive failures a test caused for real (a leader change, a frozen or killed member).
 *
 * <p>With {@code failuresAnswerExpired}, such a failure reaches jetcd as etcd's answer for an
 * expired lease instead (TTL 0, which jetcd reports as {@code NOT_FOUND}): the classification of
 * a backend that takes every keep-alive failure for a lost lease, the negative control.
 */
final class KeepAliveFailures implements ClientInterceptor {

  private static final String LEASE_KEEP_ALIVE = "etcdserverpb.Lease/LeaseKeepAlive";

  private final boolean failuresAnswerExpired;
  private final List<Status> failures = new CopyOnWriteArrayList<>();
  private final AtomicInteger answers = new AtomicInteger();

  KeepAliveFailures(boolean failuresAnswerExpired) {
    this.failuresAnswerExpired = failuresAnswerExpired;
  }

  /** The error statuses of the keep-alive calls that failed before an answer, in order. */
  List<Status> failures() {
    return List.copyOf(failures);
  }

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
}
