package dev.nolock.testkit;

import static org.awaitility.Awaitility.await;

import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.LeaseHolder;
import dev.nolock.patterns.LockBackend;
import dev.nolock.patterns.ObservedLease;
import dev.nolock.testkit.internal.CensusHook;
import io.vavr.control.Option;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.lifecycle.AddLifecycleHook;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.ActionChain;
import net.jqwik.api.state.Transformer;

/**
 * A stateful property of a {@link LockBackend} against its real server: jqwik action chains of
 * acquire, renew, release, the same under a lost answer or a lost request, a holder that pauses
 * past its lease while another grant takes over, and the retry after "unknown", in random order
 * over a few grants and two lock names, each answer checked against a small model of what may be
 * true. A backend's test extends it with the hooks of {@code LockBackendLostAnswerContract}.
 *
 * <p>The model keeps, per grant (an owner names one grant): HELD (granted, nothing since could have
 * ended it but time), MAYBE (an answer was unknown) or OUT (ended by a definite event: released,
 * lost, refused, or the lease is someone else's now); the token, when known; and until when the
 * lease is certainly unexpired (the send time of the last confirmed grant or renewal plus its TTL:
 * the server applied it no earlier). Per name it keeps every token seen and whose it was.
 *
 * <p>Checked after each action (the property fails with the shrunk chain and the broken rule):
 *
 * <ol>
 *   <li>No false definite outcome: a new grant refused while no other grant may hold the lease; a
 *       grant while another one's lease was certainly unexpired; a release answered false while
 *       this grant certainly held, or while the lease is still stored as this grant's and
 *       unexpired; a renew false likewise; a release or renew true for a grant that had ended.
 *   <li>Tokens strictly increase across grants: a new grant's token is above every token seen of
 *       another grant of that name, and no token ever belongs to two grants.
 *   <li>The stored lease ({@link #peek}) never shows a grant the model has ended, never another
 *       grant than one whose lease is certainly unexpired: never two holders.
 *   <li>A lease nobody believes they hold (its holder paused past its TTL) is taken by a new grant
 *       within the TTL plus {@link #serverSlack()} (and the slack the expiry tests of {@link
 *       LockBackendContract} allow a busy machine).
 *   <li>After the run, each fault action (operation × {@link FaultKind}) fired at least {@link
 *       ActionCensus#MIN_PER_FAULT_KIND} times ({@link ActionCensus}); the census is printed.
 * </ol>
 *
 * <p>Tries: {@link #defaultTries()}, or {@code -Dnolock.property.tries=N}.
 */
public abstract class LockBackendProperties implements CensusHook.Censused {

  /** What a fault loses the answer (or the request) of. */
  public enum Operation {
    ACQUIRE,
    RENEW,
    RELEASE
  }

  /** A backend with no fault on its path (same server, same table/keyspace as faultyBackend()). */
  protected abstract LockBackend backend();

  /** The backend whose requests {@link #inject} faults; it goes to the same server and data. */
  protected abstract LockBackend faultyBackend();

  /** The stored lease, read natively, or empty; as {@link LockBackendContract#peek}. */
  protected abstract Option<ObservedLease> peek(String name);

  /**
   * Arms one fault on the next request of {@code op} that {@link #faultyBackend()} sends.
   * ANSWER_LOST: the server applies the request, then {@code meanwhile} runs, then the caller's
   * connection drops (its driver or SDK may resend by itself). REQUEST_LOST: {@code meanwhile}
   * runs, then the connection drops before the server sees the request.
   */
  protected abstract InjectedFault inject(Operation op, FaultKind kind, Runnable meanwhile);

  /** A TTL no chain outlasts. */
  protected Duration ttl() {
    return Duration.ofSeconds(10);
  }

  /** The TTL of leases that a chain lets expire. */
  protected Duration shortTtl() {
    return Duration.ofMillis(600);
  }

  /** Extra time the server may keep a lease past its TTL (e.g. whole-second rounding). */
  protected Duration serverSlack() {
    return Duration.ZERO;
  }

  /**
   * Chains per property run unless {@code -Dnolock.property.tries} says otherwise: enough that the
   * rarest fault action clears the census floor with room to spare, so that a CI run never fails on
   * too few faults rather than on a bug. A renewal under a fault needs a grant held through the
   * faulty backend, and its two kinds split what is left at random: with 16 chains PostgreSQL's run
   * once had 9 such renewals, 3 of one kind (a typical run has about 30); 32 chains double the
   * count, for about 10 s more per backend.
   */
  @Override
  public int defaultTries() {
    return 32;
  }

  /** Actions per chain. */
  protected int actionsPerChain() {
    return 16;
  }

  private final FaultCensus census = new FaultCensus(Operation.values());

  @Override
  public final ActionCensus startCensus() {
    return census.start();
  }

  /** The census of the current (or last) property run. */
  protected final ActionCensus census() {
    return census.current();
  }

  @Property(shrinking = net.jqwik.api.ShrinkingMode.BOUNDED)
  @AddLifecycleHook(CensusHook.class)
  public void everyAnswerIsTrueOrUnknown(@ForAll("lockChains") ActionChain<Model> chain) {
    chain.withInvariant("the stored lease agrees with the model", Model::checkPeek).run();
  }

  @Provide
  public Arbitrary<ActionChain<Model>> lockChains() {
    return ActionChain.<Model>startWith(Model::new)
        .withAction(3, new Acquire(false))
        .withAction(1, new Acquire(true))
        .withAction(5, new AcquireUnderFault())
        .withAction(2, new Renew())
        .withAction(9, new RenewUnderFault())
        .withAction(2, new Release())
        .withAction(5, new ReleaseUnderFault())
        .withAction(2, new ReleaseLostWhileTheNextGrantTakesOver())
        .withAction(3, new RetryAcquire())
        .withAction(1, new PauseUntilTakenOver())
        .withMaxTransformations(actionsPerChain());
  }

  enum Status {
    HELD,
    MAYBE,
    OUT
  }

  /** One grant: an owner that names it, the backend instance it was made through. */
  static final class Grant {
    final String owner;
    final String name;
    final boolean faulty;
    Status status = Status.OUT;

    /** The grant's latest token as the model knows it, from an answer or from the store. */
    FencingToken token;

    /**
     * The token a backend answered this grant with: the only one its caller can renew or release
     * with. A token only seen in the store (after an acquire whose answer was unknown) is not one.
     */
    FencingToken answered;

    Duration ttl;
    long certainUntil;

    Grant(String owner, String name, boolean faulty, Duration ttl) {
      this.owner = owner;
      this.name = name;
      this.faulty = faulty;
      this.ttl = ttl;
    }

    boolean certainlyUnexpiredAt(long nanos) {
      return status == Status.HELD && nanos - certainUntil < 0;
    }

    @Override
    public String toString() {
      return owner + "@" + name + "[" + status + (token == null ? "" : ", " + token.value()) + "]";
    }
  }

  /** The model of one chain, and the backend calls that change it. */
  public final class Model {
    private final String prefix = "props-" + UUID.randomUUID().toString().substring(0, 8) + "-";
    private final List<String> names = List.of(prefix + "a", prefix + "b");
    private final Map<String, Grant> grants = new HashMap<>();
    private final Map<String, Map<Long, String>> tokens = new HashMap<>();
    private final LockBackend faulty = faultyBackend();
    private final LockBackend plain = backend();
    private int nextGrant;

    List<String> names() {
      return names;
    }

    List<Grant> grants() {
      return new ArrayList<>(grants.values());
    }

    Grant grant(String owner) {
      return grants.get(owner);
    }

    String newOwner() {
      return "g" + (++nextGrant);
    }

    LockBackend via(Grant grant) {
      return grant.faulty ? faulty : plain;
    }

    List<Grant> on(String name) {
      return grants.values().stream().filter(g -> g.name.equals(name)).toList();
    }

    boolean mayBeHeldByOtherThan(String name, Grant grant) {
      return on(name).stream().anyMatch(g -> g != grant && g.status != Status.OUT);
    }

    boolean free(String name) {
      return on(name).stream().allMatch(g -> g.status == Status.OUT);
    }

    boolean onlyShortLeases(String name) {
      return on(name).stream()
          .allMatch(g -> g.status == Status.OUT || g.ttl.compareTo(shortTtl()) <= 0);
    }

    /** Records a new token of {@code grant}; fails when it does not rise above other grants'. */
    void newToken(Grant grant, FencingToken token, String how) {
      Map<Long, String> seen = tokens.computeIfAbsent(grant.name, n -> new HashMap<>());
      String before = seen.get(token.value());
      if (before != null && !before.equals(grant.owner)) {
        fail(how + " returned token " + token.value() + " of another grant, " + before);
      }
      for (Map.Entry<Long, String> other : seen.entrySet()) {
        if (!other.getValue().equals(grant.owner) && other.getKey() > token.value()) {
          fail(
              how
                  + " returned token "
                  + token.value()
                  + ", below token "
                  + other.getKey()
                  + " of the earlier grant "
                  + other.getValue()
                  + ": tokens must strictly increase across grants");
        }
      }
      seen.put(token.value(), grant.owner);
    }

    /** The lease of {@code name} is {@code holder}'s now: every other grant has ended. */
    void onlyHolder(String name, Grant holder) {
      for (Grant g : on(name)) {
        if (g != holder) {
          g.status = Status.OUT;
        }
      }
    }

    /** A grant of {@code holder} may have happened: others' leases may have ended, not surely. */
    void mayHaveTakenOver(String name, Grant holder, long returned) {
      for (Grant g : on(name)) {
        if (g != holder && g.status == Status.HELD && !g.certainlyUnexpiredAt(returned)) {
          g.status = Status.MAYBE;
        }
      }
    }

    void confirm(Grant grant, FencingToken token, Duration ttl, long sent) {
      grant.status = Status.HELD;
      grant.token = token;
      grant.answered = token;
      grant.ttl = ttl;
      grant.certainUntil = sent + ttl.toNanos();
    }

    /** Tries to acquire; the answer, or null for "unknown". */
    Option<FencingToken> acquire(Grant grant, Duration ttl, boolean retry, Supplier<String> fault) {
      long sent = System.nanoTime();
      Option<FencingToken> answer =
          unknownAsNull(() -> via(grant).tryAcquire(grant.name, grant.owner, ttl));
      long returned = System.nanoTime();
      String how = (retry ? "a retry of the acquire by " : "the acquire by ") + grant + fault.get();
      if (answer == null) {
        grant.ttl = max(grant.ttl, ttl);
        if (grant.status == Status.OUT) {
          grant.status = Status.MAYBE;
        }
        mayHaveTakenOver(grant.name, grant, returned);
        return null;
      }
      if (answer.isDefined()) {
        for (Grant other : on(grant.name)) {
          if (other != grant && other.certainlyUnexpiredAt(returned)) {
            fail(how + " was granted while " + other + " certainly held an unexpired lease");
          }
        }
        if (grant.token != null
            && !grant.token.equals(answer.get())
            && grant.status != Status.OUT
            && grant.certainlyUnexpiredAt(returned)) {
          fail(how + " granted a new token " + answer.get().value() + " while its own lease ran");
        }
        newToken(grant, answer.get(), how);
        confirm(grant, answer.get(), ttl, sent);
        onlyHolder(grant.name, grant);
        return answer;
      }
      if (!retry && !mayBeHeldByOtherThan(grant.name, grant)) {
        fail(
            how
                + " was refused while the model says nobody else can hold "
                + grant.name
                + " (grants: "
                + on(grant.name)
                + "): a false refusal");
      }
      if (!retry) {
        grant.status = Status.OUT;
      }
      return answer;
    }

    Boolean renew(Grant grant, Supplier<String> fault) {
      long sent = System.nanoTime();
      Duration ttl = grant.ttl;
      Boolean answer =
          unknownAsNull(() -> via(grant).renew(grant.name, grant.owner, grant.answered, ttl));
      long returned = System.nanoTime();
      String how = "the renew by " + grant + fault.get();
      if (answer == null) {
        return null;
      }
      if (answer) {
        if (grant.status == Status.OUT) {
          fail(how + " answered true for a grant that had ended");
        }
        confirm(grant, grant.answered, ttl, sent);
        onlyHolder(grant.name, grant);
      } else {
        if (grant.certainlyUnexpiredAt(returned)) {
          fail(how + " answered false while the grant certainly held an unexpired lease");
        }
        stillStoredAsOwn(grant, how);
        grant.status = Status.OUT;
      }
      return answer;
    }

    Boolean release(Grant grant, Supplier<String> fault) {
      Boolean answer =
          unknownAsNull(() -> via(grant).release(grant.name, grant.owner, grant.answered));
      long returned = System.nanoTime();
      String how = "the release by " + grant + fault.get();
      if (answer == null) {
        if (grant.status == Status.HELD) {
          grant.status = Status.MAYBE;
        }
        return null;
      }
      if (answer) {
        if (grant.status == Status.OUT) {
          fail(how + " answered true for a grant that had ended");
        }
      } else {
        if (grant.certainlyUnexpiredAt(returned)) {
          fail(how + " answered false while this grant certainly held an unexpired lease");
        }
        stillStoredAsOwn(grant, how);
      }
      grant.status = Status.OUT;
      return answer;
    }

    /** Fails when the store still shows {@code grant}'s unexpired lease after a "false". */
    private void stillStoredAsOwn(Grant grant, String how) {
      Option<ObservedLease> stored = peek(grant.name);
      if (stored
          .flatMap(ObservedLease::liveHolder)
          .exists(h -> h.owner().equals(grant.owner) && h.token().equals(grant.answered))) {
        fail(
            how
                + " answered false while the store still shows this grant's unexpired lease: "
                + stored.get());
      }
    }

    /** A new grant through the plain backend, polled until the lease is free. */
    Grant takeOver(String name) {
      Grant next = new Grant(newOwner(), name, false, shortTtl());
      grants.put(next.owner, next);
      AtomicReference<FencingToken> token = new AtomicReference<>();
      AtomicReference<Long> sent = new AtomicReference<>();
      Duration bound = shortTtl().multipliedBy(5).plus(serverSlack()).plusSeconds(2);
      try {
        await("a new grant of " + name + " once its leases expired")
            .atMost(bound)
            .pollInterval(Duration.ofMillis(20))
            .until(
                () -> {
                  sent.set(System.nanoTime());
                  Option<FencingToken> got = plain.tryAcquire(name, next.owner, shortTtl());
                  got.forEach(token::set);
                  return got.isDefined();
                });
      } catch (org.awaitility.core.ConditionTimeoutException e) {
        fail(
            "a lease nobody believes they hold was not free within "
                + bound
                + " (TTL "
                + shortTtl()
                + " + serverSlack "
                + serverSlack()
                + " + the expiry tests'"
                + " allowance for a busy machine); grants: "
                + on(name)
                + ", stored: "
                + peek(name));
      }
      newToken(next, token.get(), "the takeover by " + next);
      confirm(next, token.get(), shortTtl(), sent.get());
      onlyHolder(name, next);
      return next;
    }

    /** The invariant after each action: the stored lease agrees with the model. */
    void checkPeek() {
      for (String name : names) {
        Option<ObservedLease> stored = peek(name);
        // Certainty is judged once the peek has returned: the store (or an observer on its own
        // clock) judged expiry no later than that, and a lease certain then was certain during the
        // read too. A time read before the peek would count a lease that ran out during the read.
        long now = System.nanoTime();
        List<Grant> certain = on(name).stream().filter(g -> g.certainlyUnexpiredAt(now)).toList();
        if (certain.size() > 1) {
          fail("two grants certainly hold " + name + " at once: " + certain);
        }
        // A free lease (released, or never held) is held by no grant, as much as a missing one.
        if (stored.flatMap(ObservedLease::holder).isEmpty()) {
          if (!certain.isEmpty()) {
            fail(
                "the store shows no held lease of "
                    + name
                    + " ("
                    + stored
                    + ") while "
                    + certain.get(0)
                    + " certainly holds it");
          }
          on(name).forEach(g -> g.status = Status.OUT);
          continue;
        }
        ObservedLease lease = stored.get();
        LeaseHolder holder = lease.holder().get();
        Grant owner = grants.get(holder.owner());
        if (!certain.isEmpty() && lease.isExpired()) {
          fail(
              "the store shows the lease of "
                  + name
                  + " expired while "
                  + certain.get(0)
                  + " certainly holds it unexpired: "
                  + lease);
        }
        if (!certain.isEmpty()
            && (!certain.get(0).owner.equals(holder.owner())
                || !holder.token().equals(certain.get(0).token))) {
          fail(
              "the store shows "
                  + lease
                  + " for "
                  + name
                  + " while "
                  + certain.get(0)
                  + " certainly holds it: two holders");
        }
        if (owner == null || !owner.name.equals(name)) {
          fail("the store shows " + lease + " for " + name + ", a grant this chain never made");
        }
        if (!lease.isExpired() && owner.status == Status.OUT) {
          fail(
              "the store shows the unexpired lease "
                  + lease
                  + " of "
                  + owner
                  + ", a grant the backend said had ended (released, lost or refused)");
        }
        if (owner.token == null) {
          newToken(owner, holder.token(), "the stored lease of " + owner);
          owner.token = holder.token();
        } else if (!owner.token.equals(holder.token())) {
          newToken(owner, holder.token(), "the stored lease of " + owner);
          owner.token = holder.token();
        }
        onlyHolder(name, owner);
      }
    }

    private void fail(String message) {
      throw new AssertionError(message);
    }

    @Override
    public String toString() {
      return "Model" + grants.values();
    }
  }

  private static Duration max(Duration a, Duration b) {
    return a.compareTo(b) >= 0 ? a : b;
  }

  /** The call's answer, or null when it threw {@link BackendUnavailableException}. */
  private static <T> T unknownAsNull(Supplier<T> call) {
    try {
      return call.get();
    } catch (BackendUnavailableException unknown) {
      return null;
    }
  }

  private static String none() {
    return "";
  }

  /** Arms a fault, makes the call, and counts the fault when it fired. */
  private void armed(Operation op, FaultKind kind, Runnable meanwhile, Runnable call) {
    InjectedFault fault = inject(op, kind, meanwhile);
    call.run();
    if (fault.fired()) {
      census.ran(ActionCensus.fault(op.name(), kind));
    } else {
      census.ran(ActionCensus.fault(op.name(), kind) + " (armed, not fired)");
    }
  }

  // ----- actions. Transformers name grants by owner and lock names by index, so that a shrunk
  // chain replayed on a fresh model resolves them again; one that no longer applies does nothing.

  private Transformer<Model> step(
      String action, String description, java.util.function.Consumer<Model> body) {
    return Transformer.mutate(
        description,
        model -> {
          census.ran(action);
          body.accept(model);
        });
  }

  private Arbitrary<Integer> nameIndex() {
    return Arbitraries.integers().between(0, 1);
  }

  private static Arbitrary<FaultKind> kinds() {
    return Arbitraries.of(FaultKind.class);
  }

  /** A new grant asks for the lease, with the long or the short TTL. */
  final class Acquire implements Action.Independent<Model> {
    private final boolean shortLease;

    Acquire(boolean shortLease) {
      this.shortLease = shortLease;
    }

    @Override
    public Arbitrary<Transformer<Model>> transformer() {
      return nameIndex()
          .map(
              i ->
                  step(
                      "acquire",
                      "acquire " + i + (shortLease ? " (short TTL)" : ""),
                      model -> {
                        String name = model.names().get(i);
                        Grant grant =
                            new Grant(
                                model.newOwner(), name, true, shortLease ? shortTtl() : ttl());
                        model.grants.put(grant.owner, grant);
                        model.acquire(grant, grant.ttl, false, LockBackendProperties::none);
                      }));
    }
  }

  /** A new grant asks for a lease the model says is free, and loses the answer or the request. */
  final class AcquireUnderFault implements Action.Dependent<Model> {
    @Override
    public boolean precondition(Model model) {
      return model.names().stream().anyMatch(model::free);
    }

    @Override
    public Arbitrary<Transformer<Model>> transformer(Model model) {
      List<Integer> free = new ArrayList<>();
      for (int i = 0; i < model.names().size(); i++) {
        if (model.free(model.names().get(i))) {
          free.add(i);
        }
      }
      return Arbitraries.of(free)
          .flatMap(
              i ->
                  kinds()
                      .map(
                          kind ->
                              step(
                                  "acquire under a fault",
                                  "acquire " + i + " under " + kind,
                                  m -> {
                                    String name = m.names().get(i);
                                    Grant grant = new Grant(m.newOwner(), name, true, shortTtl());
                                    m.grants.put(grant.owner, grant);
                                    armed(
                                        Operation.ACQUIRE,
                                        kind,
                                        () -> {},
                                        () ->
                                            m.acquire(
                                                grant, shortTtl(), false, () -> " under " + kind));
                                  })));
    }
  }

  /** The grant whose acquire was unknown asks again, with the same owner. */
  final class RetryAcquire implements Action.Dependent<Model> {
    @Override
    public boolean precondition(Model model) {
      return model.grants().stream().anyMatch(g -> g.status == Status.MAYBE && g.faulty);
    }

    @Override
    public Arbitrary<Transformer<Model>> transformer(Model model) {
      List<String> owners =
          model.grants().stream()
              .filter(g -> g.status == Status.MAYBE && g.faulty)
              .map(g -> g.owner)
              .sorted()
              .toList();
      return Arbitraries.of(owners)
          .map(
              owner ->
                  step(
                      "retry after unknown",
                      "retry the acquire of " + owner,
                      m -> {
                        Grant grant = m.grant(owner);
                        if (grant != null && grant.status == Status.MAYBE) {
                          m.acquire(grant, grant.ttl, true, LockBackendProperties::none);
                        }
                      }));
    }
  }

  private List<String> ownersWithTokens(Model model, boolean faultyOnly, boolean heldOnly) {
    return model.grants().stream()
        .filter(g -> g.answered != null && (!faultyOnly || g.faulty))
        .filter(g -> !heldOnly || g.status == Status.HELD)
        .map(g -> g.owner)
        .sorted()
        .toList();
  }

  /** What an action does to one grant; {@code fault} says what fault it ran under, for messages. */
  @FunctionalInterface
  interface GrantCall {
    void call(Model model, Grant grant, Supplier<String> fault);
  }

  /**
   * An action of one grant its backend answered with a token, picked by owner among {@link
   * #ownersWithTokens}: without a fault by any such grant, or, when {@code faultOn} is set, by a
   * grant of the faulty backend under an armed fault of each {@link FaultKind}.
   */
  abstract class OnGrant implements Action.Dependent<Model> {
    private final String verb;
    private final Operation faultOn;
    private final boolean heldOnly;
    private final GrantCall call;

    /**
     * @param faultOn the operation whose fault is armed, or null for none
     * @param heldOnly only grants the model says hold the lease
     */
    OnGrant(String verb, Operation faultOn, boolean heldOnly, GrantCall call) {
      this.verb = verb;
      this.faultOn = faultOn;
      this.heldOnly = heldOnly;
      this.call = call;
    }

    private List<String> owners(Model model) {
      return ownersWithTokens(model, faultOn != null, heldOnly);
    }

    @Override
    public boolean precondition(Model model) {
      return !owners(model).isEmpty();
    }

    @Override
    public Arbitrary<Transformer<Model>> transformer(Model model) {
      Arbitrary<String> owners = Arbitraries.of(owners(model));
      if (faultOn == null) {
        return owners.map(
            owner ->
                step(
                    verb,
                    verb + " " + owner,
                    m ->
                        withToken(
                            m, owner, grant -> call.call(m, grant, LockBackendProperties::none))));
      }
      return owners.flatMap(
          owner ->
              kinds()
                  .map(
                      kind ->
                          step(
                              verb + " under a fault",
                              verb + " " + owner + " under " + kind,
                              m ->
                                  withToken(
                                      m,
                                      owner,
                                      grant ->
                                          armed(
                                              faultOn,
                                              kind,
                                              () -> {},
                                              () ->
                                                  call.call(m, grant, () -> " under " + kind))))));
    }

    /** Runs {@code body} on {@code owner}'s grant, unless a shrunk chain has none with a token. */
    private void withToken(Model m, String owner, java.util.function.Consumer<Grant> body) {
      Grant grant = m.grant(owner);
      if (grant != null && grant.answered != null) {
        body.accept(grant);
      }
    }
  }

  /** Any grant with a known token renews: the holder, or a stale one that must be refused. */
  final class Renew extends OnGrant {
    Renew() {
      super("renew", null, false, Model::renew);
    }
  }

  /** A holder renews and loses the answer or the request. */
  final class RenewUnderFault extends OnGrant {
    RenewUnderFault() {
      super("renew", Operation.RENEW, true, Model::renew);
    }
  }

  /** Any grant with a known token releases: the holder, again, or a stale one. */
  final class Release extends OnGrant {
    Release() {
      super("release", null, false, Model::release);
    }
  }

  /** A grant with a known token releases and loses the answer or the request. */
  final class ReleaseUnderFault extends OnGrant {
    ReleaseUnderFault() {
      super("release", Operation.RELEASE, false, Model::release);
    }
  }

  /**
   * The holder's release lands, and before its answer (or its resend) arrives a new grant takes the
   * freed lease: the release must then be reported true or unknown, never false.
   */
  final class ReleaseLostWhileTheNextGrantTakesOver implements Action.Dependent<Model> {
    @Override
    public boolean precondition(Model model) {
      return !ownersWithTokens(model, true, true).isEmpty();
    }

    @Override
    public Arbitrary<Transformer<Model>> transformer(Model model) {
      return Arbitraries.of(ownersWithTokens(model, true, true))
          .map(
              owner ->
                  step(
                      "release lost while the next grant takes over",
                      "release " + owner + " under ANSWER_LOST while a new grant takes over",
                      m -> {
                        Grant grant = m.grant(owner);
                        if (grant == null || grant.answered == null) {
                          return;
                        }
                        Grant next = new Grant(m.newOwner(), grant.name, false, shortTtl());
                        m.grants.put(next.owner, next);
                        AtomicReference<Option<FencingToken>> taken = new AtomicReference<>();
                        AtomicReference<Long> takenSent = new AtomicReference<>();
                        java.util.concurrent.atomic.AtomicBoolean asked =
                            new java.util.concurrent.atomic.AtomicBoolean();
                        armed(
                            Operation.RELEASE,
                            FaultKind.ANSWER_LOST,
                            () -> {
                              asked.set(true);
                              takenSent.set(System.nanoTime());
                              taken.set(
                                  unknownAsNull(
                                      () -> m.plain.tryAcquire(next.name, next.owner, shortTtl())));
                            },
                            () -> {
                              Boolean released =
                                  unknownAsNull(
                                      () ->
                                          m.faulty.release(
                                              grant.name, grant.owner, grant.answered));
                              // Judged once the release had surely landed: as the takeover
                              // began, or (the fault never fired) once the release returned.
                              boolean heldWhenApplied =
                                  grant.certainlyUnexpiredAt(
                                      asked.get() ? takenSent.get() : System.nanoTime());
                              String how =
                                  "the release by "
                                      + grant
                                      + " under ANSWER_LOST, while "
                                      + next.owner
                                      + " took the freed lease";
                              Option<FencingToken> got = taken.get();
                              if (!asked.get()) {
                                next.status = Status.OUT; // the fault never fired: never asked
                              } else if (got == null) {
                                next.status = Status.MAYBE; // its own acquire was unknown
                              } else if (got.isDefined()) {
                                m.newToken(next, got.get(), "the next grant " + next.owner);
                                m.confirm(next, got.get(), shortTtl(), takenSent.get());
                                m.onlyHolder(next.name, next);
                              } else if (heldWhenApplied) {
                                m.fail(
                                    how.replace("took", "was refused")
                                        + ": the release landed (its answer was lost), so the lease"
                                        + " was free");
                              }
                              if (Boolean.FALSE.equals(released) && heldWhenApplied) {
                                m.fail(
                                    how
                                        + " answered false: the release landed before the"
                                        + " takeover, a false definite outcome");
                              }
                              if (released != null || got != null && got.isDefined()) {
                                grant.status = Status.OUT;
                              } else if (grant.status == Status.HELD) {
                                grant.status = Status.MAYBE;
                              }
                            });
                      }));
    }
  }

  /**
   * Every grant of a name pauses past its (short) lease; a new grant must get the lease within the
   * TTL plus the server's slack, and every earlier grant's renew and release must then fail.
   */
  final class PauseUntilTakenOver implements Action.Dependent<Model> {
    @Override
    public boolean precondition(Model model) {
      return model.names().stream().anyMatch(n -> !model.free(n) && model.onlyShortLeases(n));
    }

    @Override
    public Arbitrary<Transformer<Model>> transformer(Model model) {
      List<Integer> paused = new ArrayList<>();
      for (int i = 0; i < model.names().size(); i++) {
        String n = model.names().get(i);
        if (!model.free(n) && model.onlyShortLeases(n)) {
          paused.add(i);
        }
      }
      return Arbitraries.of(paused)
          .map(
              i ->
                  step(
                      "pause past the lease, then a takeover",
                      "pause the holders of " + i + " past their lease; a new grant takes it",
                      m -> {
                        String name = m.names().get(i);
                        if (m.onlyShortLeases(name)) {
                          m.takeOver(name);
                        }
                      }));
    }
  }
}
