package dev.nolock.testkit;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.LockBackendLostAnswerContract.Operation;
import io.vavr.control.Option;
import java.io.IOException;
import java.time.Duration;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;

/**
 * A {@link LockBackend} wrapper that loses one request or one answer on purpose, for a backend with
 * no network of its own (an in-memory one), so that it can run {@link
 * LockBackendLostAnswerContract}: it plays the connection and the client between the caller and the
 * wrapped backend.
 *
 * <p>{@link #arm} arms a fault for the next call of one {@link Operation}; it fires once. When it
 * fires:
 *
 * <ol>
 *   <li>{@link FaultKind#ANSWER_LOST}: the call is applied on the wrapped backend and its answer is
 *       dropped; then {@code meanwhile} runs; then, in mode {@link Mode#REPORTS}, the call throws
 *       {@link BackendUnavailableException}, and in mode {@link Mode#RESENDS} it is applied on the
 *       wrapped backend a second time and that second answer is returned, as a client that resends
 *       after a dropped connection would.
 *   <li>{@link FaultKind#REQUEST_LOST}: {@code meanwhile} runs; then, in mode {@link Mode#REPORTS},
 *       the call throws {@link BackendUnavailableException} without being applied, and in mode
 *       {@link Mode#RESENDS} it is applied once and its answer returned.
 * </ol>
 *
 * <p>Calls with no armed fault, and {@link #holder}, go straight to the wrapped backend.
 * Thread-safe.
 */
public final class LostAnswerLockBackend implements LockBackend {

  /** What the client does after the connection dropped. */
  public enum Mode {
    /** It reports "outcome unknown": {@link BackendUnavailableException}. */
    REPORTS,
    /** It sends the same request again and returns that answer. */
    RESENDS
  }

  private final LockBackend wrapped;
  private final Mode mode;
  private final List<Fault> armed = new CopyOnWriteArrayList<>();

  private LostAnswerLockBackend(LockBackend wrapped, Mode mode) {
    this.wrapped = Objects.requireNonNull(wrapped, "wrapped");
    this.mode = Objects.requireNonNull(mode, "mode");
  }

  /** {@code backend} behind a connection that can lose one request or answer per armed fault. */
  public static LostAnswerLockBackend wrap(LockBackend backend, Mode mode) {
    return new LostAnswerLockBackend(backend, mode);
  }

  /** The client's behaviour after a dropped connection. */
  public Mode mode() {
    return mode;
  }

  /**
   * Arms {@code kind} for the next call of {@code op}.
   *
   * @param meanwhile runs when the fault fires, on the calling thread, after the wrapped backend
   *     applied the call ({@link FaultKind#ANSWER_LOST}) and before the caller is answered; it must
   *     not call this wrapper's armed operation (it would go straight through, but it is the other
   *     party's request and belongs on the wrapped backend)
   * @return the armed fault
   */
  public InjectedFault arm(Operation op, FaultKind kind, Runnable meanwhile) {
    Fault fault =
        new Fault(
            Objects.requireNonNull(op, "op"),
            Objects.requireNonNull(kind, "kind"),
            Objects.requireNonNull(meanwhile, "meanwhile"));
    armed.add(fault);
    return fault;
  }

  @Override
  public Option<FencingToken> tryAcquire(String name, String owner, Duration ttl) {
    return through(Operation.ACQUIRE, () -> wrapped.tryAcquire(name, owner, ttl));
  }

  @Override
  public boolean renew(String name, String owner, FencingToken token, Duration ttl) {
    return through(Operation.RENEW, () -> wrapped.renew(name, owner, token, ttl));
  }

  @Override
  public boolean release(String name, String owner, FencingToken token) {
    return through(Operation.RELEASE, () -> wrapped.release(name, owner, token));
  }

  @Override
  public Option<LeaseHolder> holder(String name) {
    return wrapped.holder(name);
  }

  @Override
  public String toString() {
    return "LostAnswerLockBackend[" + mode + ", " + wrapped + "]";
  }

  private <T> T through(Operation op, Supplier<T> request) {
    Fault fault = fire(op);
    if (fault == null) {
      return request.get();
    }
    if (fault.kind == FaultKind.ANSWER_LOST) {
      request.get();
    }
    fault.meanwhile.run();
    if (mode == Mode.REPORTS) {
      throw new BackendUnavailableException(
          "The connection dropped: " + fault + "; the outcome is unknown",
          new IOException("Connection reset (injected by nolock testkit: " + fault + ")"));
    }
    return request.get();
  }

  private Fault fire(Operation op) {
    for (Fault fault : armed) {
      if (fault.op == op && fault.fired.compareAndSet(false, true)) {
        armed.remove(fault);
        return fault;
      }
    }
    return null;
  }

  private final class Fault implements InjectedFault {
    final Operation op;
    final FaultKind kind;
    final Runnable meanwhile;
    final AtomicBoolean fired = new AtomicBoolean();

    Fault(Operation op, FaultKind kind, Runnable meanwhile) {
      this.op = op;
      this.kind = kind;
      this.meanwhile = meanwhile;
    }

    @Override
    public boolean fired() {
      return fired.get();
    }

    @Override
    public String toString() {
      return "LostAnswerLockBackend " + kind + " on the next " + op + " (" + mode + ")";
    }
  }
}
