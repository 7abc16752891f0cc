package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.Optional;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;

/**
 * The contract of a {@link LockBackend} whose request or answer is lost on the way: after a dropped
 * connection the backend reports the true outcome, or throws {@link BackendUnavailableException}
 * meaning "outcome unknown"; it never reports a false definite one. A backend's test extends this
 * class, next to its {@link LockBackendContract}; users run it against their own backends too.
 *
 * <p>What every case checks, for each {@link FaultKind} where the scenario exists:
 *
 * <ol>
 *   <li>A success is never reported as a refusal: an acquire of a free name is never answered
 *       empty, a renew of a standing grant never false, a release that freed the lease never false
 *       (a client that resends after a lost answer meets its own first effect and must recognise
 *       it, or answer unknown).
 *   <li>A refusal is never reported as a success: an answer that arrives after the landed lease
 *       expired and another owner took it is never a grant, a true renew or a token over that
 *       owner's lease, and that owner's lease is left as it was.
 *   <li>A lease that nobody believes they hold blocks others for at most one TTL (plus {@link
 *       #serverSlack()}).
 *   <li>A retry after "unknown" by the same owner grants nothing new (empty or the same token), the
 *       stored state shows exactly one effect, and tokens still increase.
 * </ol>
 *
 * <p>Every case asserts that its fault fired and that its {@code meanwhile} ran: a case whose fault
 * never happened proves nothing. Testkit's own tests run the suite against backends that answer a
 * resent release false or a resent acquire empty, and show that it fails them.
 *
 * <p>To wire a backend: return a backend with no fault on its path from {@link #backend()}, one to
 * the same server and data whose requests go through an injector ({@link JdbcFaults}, {@link
 * DynamoDbFaults}, {@link TcpProxy}, or for an in-memory backend {@link LostAnswerLockBackend})
 * from {@link #faultyBackend()}, and arm the injector in {@link #inject}.
 */
public abstract class LockBackendLostAnswerContract {

  /** What a case loses the answer (or the request) of. */
  public enum Operation {
    ACQUIRE,
    RENEW,
    RELEASE
  }

  /** Time on top of a TTL for the round trips of a wait on a busy machine. */
  private static final Duration ROUND_TRIPS = Duration.ofSeconds(2);

  /**
   * A backend with no fault on its path (same server, same table/keyspace as faultyBackend()): the
   * process of the other owner, B.
   */
  protected abstract LockBackend backend();

  /**
   * The backend whose requests {@link #inject} faults; it goes to the same server and data. It is
   * owner A's process: every call of A goes through it, and only an armed request is faulted.
   */
  protected abstract LockBackend faultyBackend();

  /**
   * The stored lease of {@code name}, read natively (not through a faulty path), or empty; as
   * {@link LockBackendContract#peek}.
   */
  protected abstract Option<ObservedLease> peek(String name);

  /**
   * Arms one fault on the next request of {@code op} that {@link #faultyBackend()} sends. {@link
   * FaultKind#ANSWER_LOST}: the server applies the request, then {@code meanwhile} runs, then the
   * caller's connection drops (its driver, SDK or client may resend by itself, as it would in
   * production). {@link FaultKind#REQUEST_LOST}: {@code meanwhile} runs, then the connection drops
   * before the server sees the request.
   *
   * <p>{@code meanwhile} runs on the calling thread and uses {@link #backend()} and {@link #peek}.
   *
   * @return the armed fault; every case asserts that it fired
   */
  protected abstract InjectedFault inject(Operation op, FaultKind kind, Runnable meanwhile);

  /** A TTL no test step outlasts. */
  protected Duration ttl() {
    return Duration.ofSeconds(10);
  }

  /** A TTL the expiry cases wait out; short, but long enough for a round trip on a busy machine. */
  protected Duration shortTtl() {
    return Duration.ofMillis(600);
  }

  /**
   * Extra time the server may keep a lease past its TTL (e.g. etcd's whole-second rounding of a
   * lease's TTL); zero by default.
   */
  protected Duration serverSlack() {
    return Duration.ZERO;
  }

  private final String prefix = "lost-" + UUID.randomUUID().toString().substring(0, 8) + "-";

  /** A lock name of this run, unique per test class instance. */
  protected String name(String test) {
    return prefix + test;
  }

  @ParameterizedTest(name = "{displayName} [{0}]")
  @EnumSource(FaultKind.class)
  void acquireOfAFreeNameAnswersItsGrantOrUnknownNeverARefusal(FaultKind kind) {
    String name = name("acquire-free-" + kind);
    InjectedFault fault = inject(Operation.ACQUIRE, kind, () -> {});

    Outcome<Option<FencingToken>> answer = call(() -> faultyBackend().tryAcquire(name, "A", ttl()));

    assertFired(fault);
    FencingToken held;
    if (answer.isKnown()) {
      assertThat(answer.value().toJavaOptional())
          .as("the answer to an acquire of a name nobody held (a refusal is a false answer)")
          .isPresent();
      held = answer.value().get();
      assertThat(liveHolder(name))
          .as("the stored lease after the acquire answered %s", held)
          .contains(new LeaseHolder("A", held));
    } else {
      Option<ObservedLease> landed = peek(name).filter(lease -> !lease.isFree());
      landed.forEach(
          lease ->
              assertThat(lease.liveHolder().map(LeaseHolder::owner).toJavaOptional())
                  .as("the unexpired owner of what an acquire answered unknown left: %s", lease)
                  .contains("A"));
      Option<FencingToken> retry = faultyBackend().tryAcquire(name, "A", ttl());
      if (landed.isDefined()) {
        FencingToken token = landed.get().holder().get().token();
        assertThat(retry.toJavaOptional())
            .as("the same owner's retry after unknown, with its lease landed: nothing new")
            .isIn(Optional.empty(), Optional.of(token));
        held = token;
      } else {
        assertThat(retry.toJavaOptional())
            .as("the same owner's retry after unknown, with nothing landed: the name is free")
            .isPresent();
        held = retry.get();
      }
      assertThat(liveHolder(name))
          .as("exactly one effect stored after the unknown acquire and its retry")
          .contains(new LeaseHolder("A", held));
    }
    assertThat(backend().tryAcquire(name, "B", ttl()).isEmpty())
        .as("another owner while A's grant stands")
        .isTrue();
    assertThat(faultyBackend().release(name, "A", held)).as("A's release of its grant").isTrue();
    FencingToken next = backend().tryAcquire(name, "B", ttl()).get();
    assertThat(next.isNewerThan(held))
        .as("the next grant's token %s after %s", next, held)
        .isTrue();
  }

  @ParameterizedTest(name = "{displayName} [{0}]")
  @EnumSource(FaultKind.class)
  void aLeaseLeftByAnAcquireUnderAFaultBlocksOthersForOneTtlAtMost(FaultKind kind) {
    String name = name("acquire-expires-" + kind);
    InjectedFault fault = inject(Operation.ACQUIRE, kind, () -> {});

    Outcome<Option<FencingToken>> answer =
        call(() -> faultyBackend().tryAcquire(name, "A", shortTtl()));

    assertFired(fault);
    if (answer.isKnown()) {
      assertThat(answer.value().toJavaOptional()).as("the answer on a free name").isPresent();
    }
    Option<FencingToken> landed = peek(name).flatMap(ObservedLease::holder).map(LeaseHolder::token);
    // Nobody renews the lease: whether A learnt of it or not, it must free itself.
    FencingToken next = awaitTakeover(name, shortTtl());
    landed.forEach(
        token ->
            assertThat(next.isNewerThan(token))
                .as("B's token %s after the landed %s", next, token)
                .isTrue());
    assertThat(liveHolder(name)).contains(new LeaseHolder("B", next));
  }

  @ParameterizedTest(name = "{displayName} [{0}]")
  @EnumSource(FaultKind.class)
  void anAcquireAnsweredAfterItsLeaseExpiredAndBTookItClaimsNothingOverB(FaultKind kind) {
    String name = name("acquire-overtaken-" + kind);
    AtomicReference<FencingToken> b = new AtomicReference<>();
    InjectedFault fault =
        inject(Operation.ACQUIRE, kind, () -> b.set(awaitTakeover(name, shortTtl())));

    Outcome<Option<FencingToken>> answer =
        call(() -> faultyBackend().tryAcquire(name, "A", shortTtl()));

    assertFired(fault);
    assertThat(b.get())
        .as("B's acquire, meanwhile, of the expired or never stored lease")
        .isNotNull();
    if (answer.isKnown() && answer.value().isDefined()) {
      assertThat(liveHolder(name))
          .as("A was answered %s: only true if the stored lease is that grant", answer.value())
          .contains(new LeaseHolder("A", answer.value().get()));
    }
    assertThat(liveHolder(name)).as("B's lease, untouched").contains(new LeaseHolder("B", b.get()));
  }

  @ParameterizedTest(name = "{displayName} [{0}]")
  @EnumSource(FaultKind.class)
  void renewUnderAFaultAnswersTrueOrUnknownNeverFalseWhileTheGrantStands(FaultKind kind) {
    String name = name("renew-" + kind);
    FencingToken a = faultyBackend().tryAcquire(name, "A", shortTtl()).get();
    InjectedFault fault = inject(Operation.RENEW, kind, () -> {});

    Outcome<Boolean> answer = call(() -> faultyBackend().renew(name, "A", a, ttl()));

    assertFired(fault);
    Option<ObservedLease> stored = peek(name);
    if (answer.isKnown() && !answer.value()) {
      assertThat(stored.flatMap(ObservedLease::liveHolder).toJavaOptional())
          .as("the renew answered false, so A's grant must have ended: %s", stored)
          .isNotEqualTo(Optional.of(new LeaseHolder("A", a)));
    } else if (answer.isKnown()) {
      // Holding a condition for a while is an assertion, not a synchronisation.
      await("the renewed lease outlives its first TTL")
          .during(shortTtl().multipliedBy(2))
          .atMost(shortTtl().multipliedBy(4))
          .until(() -> liveHolder(name).equals(Optional.of(new LeaseHolder("A", a))));
      assertThat(backend().tryAcquire(name, "B", ttl()).isEmpty())
          .as("another owner after a true renew")
          .isTrue();
    } else {
      assertThat(stored.flatMap(ObservedLease::holder).toJavaOptional())
          .as("an unknown renew changes no owner or token: %s", stored)
          .contains(new LeaseHolder("A", a));
    }
  }

  @ParameterizedTest(name = "{displayName} [{0}]")
  @EnumSource(FaultKind.class)
  void aRenewAnsweredAfterTheLeaseExpiredAndBTookItIsNeverTrue(FaultKind kind) {
    String name = name("renew-overtaken-" + kind);
    FencingToken a = faultyBackend().tryAcquire(name, "A", shortTtl()).get();
    AtomicReference<FencingToken> b = new AtomicReference<>();
    InjectedFault fault =
        inject(Operation.RENEW, kind, () -> b.set(awaitTakeover(name, shortTtl())));

    Outcome<Boolean> answer = call(() -> faultyBackend().renew(name, "A", a, shortTtl()));

    assertFired(fault);
    assertThat(b.get()).as("B's acquire, meanwhile, of A's expired lease").isNotNull();
    assertThat(answer.isKnown() ? answer.value() : Boolean.FALSE)
        .as("A's renew, answered after B took the lease (false or unknown)")
        .isFalse();
    assertThat(liveHolder(name)).as("B's lease, untouched").contains(new LeaseHolder("B", b.get()));
  }

  @ParameterizedTest(name = "{displayName} [{0}]")
  @EnumSource(FaultKind.class)
  void releaseUnderAFaultAnswersTrueOrUnknownAndFreesTheName(FaultKind kind) {
    String name = name("release-" + kind);
    FencingToken a = faultyBackend().tryAcquire(name, "A", ttl()).get();
    InjectedFault fault = inject(Operation.RELEASE, kind, () -> {});

    Outcome<Boolean> answer = call(() -> faultyBackend().release(name, "A", a));

    assertFired(fault);
    if (answer.isKnown()) {
      assertThat(answer.value())
          .as("the answer to the release of a standing grant (false is a false answer)")
          .isTrue();
      assertThat(backend().tryAcquire(name, "B", ttl()).isDefined())
          .as("another owner at once after a true release")
          .isTrue();
      return;
    }
    Optional<LeaseHolder> stored = liveHolder(name);
    if (stored.isPresent()) {
      assertThat(stored).as("what an unknown release left").contains(new LeaseHolder("A", a));
    }
    assertThat(awaitTakeover(name, ttl()).isNewerThan(a)).isTrue();
  }

  @Test
  void aReleaseWhoseAnswerIsLostWhileBTakesTheFreedLeaseIsNeverFalse() {
    String name = name("release-overtaken");
    FencingToken a = faultyBackend().tryAcquire(name, "A", ttl()).get();
    AtomicReference<FencingToken> b = new AtomicReference<>();
    InjectedFault fault =
        inject(
            Operation.RELEASE,
            FaultKind.ANSWER_LOST,
            () -> backend().tryAcquire(name, "B", ttl()).forEach(b::set));

    Outcome<Boolean> answer = call(() -> faultyBackend().release(name, "A", a));

    assertFired(fault);
    assertThat(b.get()).as("B's acquire, meanwhile, of the lease A's release freed").isNotNull();
    assertThat(answer.isKnown() ? answer.value() : Boolean.TRUE)
        .as("A's release, whose first send freed the lease (true or unknown)")
        .isTrue();
    assertThat(liveHolder(name)).as("B's lease, untouched").contains(new LeaseHolder("B", b.get()));
  }

  /** The holder of the unexpired lease of {@code name} that {@link #peek} shows, if any. */
  private Optional<LeaseHolder> liveHolder(String name) {
    return peek(name).flatMap(ObservedLease::liveHolder).toJavaOptional();
  }

  /**
   * Owner B, through {@link #backend()}, asks for the lease of {@code name} until it is granted,
   * for at most {@code ttl} + {@link #serverSlack()} + the round trips: a lease that nobody renews
   * must free itself within its TTL. Asking (rather than peeking first) is what lets a backend that
   * judges expiry by watching the lease (DynamoDB's rvn) start its watch.
   *
   * @return B's token
   */
  protected FencingToken awaitTakeover(String name, Duration ttl) {
    AtomicReference<FencingToken> taken = new AtomicReference<>();
    await("owner B gets the lease of " + name + " within " + ttl + " + the server's slack")
        .atMost(ttl.plus(serverSlack()).plus(ROUND_TRIPS))
        .pollInterval(Duration.ofMillis(50))
        .until(
            () -> {
              backend().tryAcquire(name, "B", ttl()).forEach(taken::set);
              return taken.get() != null;
            });
    return taken.get();
  }

  private static void assertFired(InjectedFault fault) {
    assertThat(fault).as("the armed fault").isNotNull();
    fault.assertFired();
  }

  private static <T> Outcome<T> call(Supplier<T> request) {
    try {
      return new Outcome<>(request.get(), null);
    } catch (BackendUnavailableException e) {
      return new Outcome<>(null, e);
    }
  }

  /** An answer, or "outcome unknown" ({@link BackendUnavailableException}). */
  private record Outcome<T>(T value, BackendUnavailableException unknown) {
    boolean isKnown() {
      return unknown == null;
    }
  }
}
