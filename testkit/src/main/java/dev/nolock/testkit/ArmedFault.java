package dev.nolock.testkit;

import java.util.Objects;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;

/**
 * One fault armed on an injector that sees each request of a client before it goes out ({@link
 * DynamoDbFaults}, or one written for another client's HTTP or gRPC layer): which requests it is
 * armed for, its {@link FaultKind}, what runs while the caller waits, whether it fired, and how
 * many matching requests were sent since it was armed.
 *
 * <p>Guarantees: {@link #fireFirst} counts a request in every armed fault that matches it (the lost
 * one and every resend, by the client's retry or by the code under test), and fires at most one
 * fault on it, the first in the injector's list that has not fired. So a fault fires once, and
 * faults armed for the same requests fire one per request, in the order they were armed. What the
 * fired fault does to the request ({@link #kind()}) and when it runs {@link #meanwhile()} is the
 * injector's part. Thread-safe.
 *
 * @param <R> what the injector sees of a request
 */
public final class ArmedFault<R> implements InjectedFault {

  private final String target;
  private final Predicate<? super R> matches;
  private final FaultKind kind;
  private final Runnable meanwhile;
  private final AtomicBoolean fired = new AtomicBoolean();
  private final AtomicInteger attempts = new AtomicInteger();

  /**
   * A fault, not fired yet, that the injector adds to its list of armed faults.
   *
   * @param target names the requests it is armed for, in messages (e.g. {@code "UpdateItem"})
   * @param matches accepts the requests it is armed for
   * @param meanwhile what the injector runs when the fault fires (e.g. {@code () -> {}})
   */
  public ArmedFault(
      String target, Predicate<? super R> matches, FaultKind kind, Runnable meanwhile) {
    this.target = Objects.requireNonNull(target, "target");
    this.matches = Objects.requireNonNull(matches, "matches");
    this.kind = Objects.requireNonNull(kind, "kind");
    this.meanwhile = Objects.requireNonNull(meanwhile, "meanwhile");
  }

  /**
   * Counts {@code request} in every fault of {@code armed} that matches it, and fires the first of
   * them that has not fired yet.
   *
   * @return the fault that fired on {@code request}, or null when none did
   */
  public static <R> ArmedFault<R> fireFirst(Iterable<ArmedFault<R>> armed, R request) {
    ArmedFault<R> fault = null;
    for (ArmedFault<R> candidate : armed) {
      if (candidate.matches.test(request)) {
        candidate.attempts.incrementAndGet();
        if (fault == null && candidate.fired.compareAndSet(false, true)) {
          fault = candidate;
        }
      }
    }
    return fault;
  }

  public FaultKind kind() {
    return kind;
  }

  /** The action the injector runs when this fault fires. */
  public Runnable meanwhile() {
    return meanwhile;
  }

  @Override
  public boolean fired() {
    return fired.get();
  }

  /** Matching requests sent since this fault was armed, the lost one and every resend included. */
  public int attempts() {
    return attempts.get();
  }

  @Override
  public String toString() {
    return kind
        + " on the next "
        + target
        + " ("
        + (fired() ? "fired" : "not fired")
        + ", "
        + attempts()
        + " attempt(s) counted)";
  }
}
