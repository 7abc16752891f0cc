package dev.nolock.spring.internal;

import dev.nolock.lock.ElectorConfig;
import dev.nolock.lock.HeldLock;
import dev.nolock.lock.LeaderElector;
import dev.nolock.lock.Leadership;
import dev.nolock.patterns.LockBackend;
import dev.nolock.spring.Leaders;
import dev.nolock.spring.LeadershipListener;
import io.vavr.control.Option;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Function;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.springframework.beans.factory.ListableBeanFactory;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.context.SmartLifecycle;
import org.springframework.core.annotation.AnnotationAwareOrderComparator;

/**
 * The declared elections of the application: one {@link LeaderElector} each, started when the
 * context has started and closed when it stops.
 *
 * <ol>
 *   <li>Once every singleton exists, each {@link LeadershipListener} bean is matched to its
 *       election; one naming an undeclared election fails start-up, naming the bean.
 *   <li>{@link #start()} starts a candidate per election on the {@link LockBackend}.
 *   <li>A term begins: the term is recorded (so {@link #runIfLeader} runs), then the listeners hear
 *       {@code startedLeading} in order.
 *   <li>A term ends: no new {@link #runIfLeader} work starts, the listeners hear {@code
 *       stoppedLeading} in reverse order, then the elector waits for running work for at most
 *       {@code work-stop-timeout}, and only then may it release the lease.
 *   <li>{@link #stop()} closes every elector: each steps down as above and releases its lease.
 * </ol>
 */
public final class Elections implements Leaders, SmartLifecycle, SmartInitializingSingleton {

  private static final Logger LOG = LoggerFactory.getLogger(Elections.class);

  private final LockBackend backend;
  private final ListableBeanFactory beans;
  private final Map<String, Election> elections = new LinkedHashMap<>();
  private volatile boolean running;

  public Elections(
      LockBackend backend, Map<String, ElectorConfig> configs, ListableBeanFactory beans) {
    this.backend = Objects.requireNonNull(backend, "backend");
    this.beans = Objects.requireNonNull(beans, "beans");
    configs.forEach((name, config) -> elections.put(name, new Election(config)));
  }

  @Override
  public void afterSingletonsInstantiated() {
    List<LeadershipListener> ordered =
        new ArrayList<>(beans.getBeansOfType(LeadershipListener.class).values());
    AnnotationAwareOrderComparator.sort(ordered);
    beans
        .getBeansOfType(LeadershipListener.class)
        .forEach(
            (beanName, listener) -> {
              String name = listener.election();
              if (!elections.containsKey(name)) {
                throw new IllegalStateException(
                    "Bean '"
                        + beanName
                        + "' ("
                        + listener.getClass().getName()
                        + "): its method election() names the election '"
                        + name
                        + "', which is not declared. Declare it under nolock.leader.elections."
                        + name
                        + ".* (e.g. nolock.leader.elections."
                        + name
                        + ".lease-duration=15s), or return one of "
                        + elections.keySet()
                        + ".");
              }
            });
    for (LeadershipListener listener : ordered) {
      elections.get(listener.election()).listeners.add(listener);
    }
  }

  @Override
  public boolean isLeader(String election) {
    return declared(election).isLeader();
  }

  @Override
  public <T> Option<T> runIfLeader(String election, Function<HeldLock, T> work) {
    Objects.requireNonNull(work, "work");
    return declared(election).runIfLeader(work);
  }

  private Election declared(String election) {
    Election found = elections.get(election);
    if (found == null) {
      throw new IllegalArgumentException(
          "The election '"
              + election
              + "' is not declared: declare it under nolock.leader.elections."
              + election
              + ".*, or use one of "
              + elections.keySet()
              + ".");
    }
    return found;
  }

  /**
   * What each declared election looks like from this instance, for health and the {@code nolock}
   * endpoint: whether its elector runs, whether this instance leads (with its term's token), and
   * who holds the lease according to the backend.
   *
   * <ol>
   *   <li>This instance's term is read first, under the election's lock, so a token is shown only
   *       while the term is live.
   *   <li>The backend is then asked for the lease's holder; a failure there is reported in {@link
   *       State#backendError()}, not thrown: an unreachable backend is what health wants to know.
   * </ol>
   */
  public List<State> states() {
    List<State> states = new ArrayList<>();
    for (String name : elections.keySet()) {
      states.add(state(name));
    }
    return states;
  }

  /** The declared elections' names, in declaration order. */
  public List<String> names() {
    return List.copyOf(elections.keySet());
  }

  /**
   * One election's state, as in {@link #states()}.
   *
   * @throws IllegalArgumentException when the election is not declared
   */
  public State state(String name) {
    Election election = declared(name);
    Long token = election.leadingToken();
    String holder = null;
    Long holderToken = null;
    String error = null;
    try {
      var lease = backend.holder(name);
      if (lease.isDefined()) {
        holder = lease.get().owner();
        holderToken = lease.get().token().value();
      }
    } catch (RuntimeException e) {
      error = e.getClass().getName() + ": " + e.getMessage();
    }
    return new State(
        name,
        running && election.elector != null,
        token != null,
        token,
        holder,
        holderToken,
        error);
  }

  /**
   * One election seen from this instance.
   *
   * @param name the election
   * @param running whether its elector runs (started and not closed)
   * @param leader whether this instance leads it now
   * @param token this instance's term's fencing token while it leads; null otherwise
   * @param holder the lease's owner according to the backend; null when none, or unreadable
   * @param holderToken the token of the backend's lease; null when none, or unreadable
   * @param backendError why the backend could not be read; null when it answered
   */
  public record State(
      String name,
      boolean running,
      boolean leader,
      Long token,
      String holder,
      Long holderToken,
      String backendError) {}

  @Override
  public void start() {
    try {
      for (Election election : elections.values()) {
        election.elector = LeaderElector.start(backend, election.config, election);
      }
    } catch (RuntimeException e) {
      // Spring stops only what reports running: the electors started so far are closed here.
      stop();
      throw e;
    }
    running = true;
  }

  @Override
  public void stop() {
    running = false;
    CloseAll.each(
        List.copyOf(elections.values()),
        election -> {
          LeaderElector elector = election.elector;
          election.elector = null;
          if (elector != null) {
            elector.close();
          }
        });
  }

  @Override
  public boolean isRunning() {
    return running;
  }

  @Override
  public int getPhase() {
    return NolockPhase.PHASE;
  }

  /** One election: its elector, its listeners and the current term. */
  private static final class Election implements Leadership {

    private final ElectorConfig config;
    private final List<LeadershipListener> listeners = new ArrayList<>();
    private volatile LeaderElector elector;

    // Guarded by this: the current term, whether it is ending, and the work running under it.
    private HeldLock term;
    private boolean ending;
    private int running;

    Election(ElectorConfig config) {
      this.config = config;
    }

    synchronized Long leadingToken() {
      return isLeader() ? term.token().value() : null;
    }

    synchronized boolean isLeader() {
      return term != null && !ending && term.isHeld();
    }

    <T> Option<T> runIfLeader(Function<HeldLock, T> work) {
      HeldLock current;
      synchronized (this) {
        if (term == null || ending || !term.isHeld()) {
          return Option.none();
        }
        current = term;
        running++;
      }
      try {
        return Option.some(work.apply(current));
      } finally {
        synchronized (this) {
          running--;
          notifyAll();
        }
      }
    }

    @Override
    public void onStartedLeading(HeldLock leadership) {
      synchronized (this) {
        term = leadership;
        ending = false;
      }
      for (LeadershipListener listener : listeners) {
        try {
          listener.startedLeading(leadership);
        } catch (Exception e) {
          LOG.error("{}: startedLeading of {} failed", config.name(), listener, e);
        }
      }
    }

    @Override
    public void onStoppedLeading() throws InterruptedException {
      HeldLock ended;
      synchronized (this) {
        ended = term;
        ending = true;
      }
      if (ended == null) {
        return;
      }
      for (int i = listeners.size() - 1; i >= 0; i--) {
        LeadershipListener listener = listeners.get(i);
        try {
          listener.stoppedLeading(ended.token());
        } catch (Exception e) {
          LOG.error("{}: stoppedLeading of {} failed", config.name(), listener, e);
        }
      }
      // The elector releases the lease once this returns: work still running under the term
      // would otherwise overlap a successor.
      long deadline = System.nanoTime() + config.workStopTimeout().toNanos();
      synchronized (this) {
        long left;
        while (running > 0 && (left = deadline - System.nanoTime()) > 0) {
          wait(left / 1_000_000, (int) (left % 1_000_000));
        }
        if (running > 0) {
          LOG.error(
              "{}: {} runIfLeader call(s) still running work-stop-timeout after the term ended;"
                  + " the lease is released anyway, and only the fence stops their writes",
              config.name(),
              running);
        }
        term = null;
      }
    }
  }
}
