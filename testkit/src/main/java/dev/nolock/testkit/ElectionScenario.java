package dev.nolock.testkit;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.GrantOwner;
import dev.nolock.testkit.internal.CandidateMain;
import io.vavr.control.Option;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.atomic.AtomicReference;
import org.awaitility.Awaitility;

/**
 * Leader election proven across processes: three candidates in child JVMs campaign for one
 * election; the leader is frozen with SIGSTOP between its check and its write until another is
 * elected, resumed so that its stale write goes out, and the second leader is killed with SIGKILL
 * and replaced by the third.
 *
 * <p>Steps of {@link #run}:
 *
 * <ol>
 *   <li>Start three candidates ({@link CandidateMain} running the {@link ElectionCandidate}); wait
 *       until one is elected and has passed its point-of-no-return check, and until the other two
 *       report it as the new leader.
 *   <li>Freeze that first leader with SIGSTOP right there: the freeze lands between its check and
 *       its write, and its renewals stop with it.
 *   <li>Wait until one of the other two is elected (its lease expired on the lock service), and
 *       measure how long after the freeze; the bound the elector promises is {@code leaseDuration +
 *       retryPeriod × 1.2}. The second leader writes.
 *   <li>Resume the first leader with SIGCONT: its write goes out with its old token.
 *   <li>Kill the second leader with SIGKILL (no release, no step-down); the third is elected after
 *       the lease runs out and writes. Fenced runs only: this step checks liveness, which the
 *       negative control need not show again, and skipping it saves it a lease duration.
 * </ol>
 *
 * With {@link Protection#FENCED} the first leader's stale write must be attempted and refused; with
 * {@link Protection#UNFENCED} (the negative control) the {@link FenceAuditor} must report the lost
 * update. Needs Linux ({@code kill}, {@code /proc}).
 */
public final class ElectionScenario {

  /** The value each leader writes. */
  public static final String FIRST_VALUE = "stale-leader-1";

  public static final String SECOND_VALUE = "leader-2";
  public static final String THIRD_VALUE = "leader-3";

  /** One term: which candidate led, under which token. */
  public record Term(String candidate, long pid, String owner, FencingToken token) {

    /** The candidate's identity: the lease owner without the nonce of this term's grant. */
    public String identity() {
      return GrantOwner.processOf(owner);
    }
  }

  /** The third leader, elected after the second was killed (fenced runs only). */
  public record Replacement(
      Term term, boolean accepted, Option<String> finalValue, Duration killToNewLeader) {}

  /** The outcome of one run. */
  public record Result(
      Term first,
      Term second,
      Option<Replacement> replacement,
      boolean staleWriteAccepted,
      boolean secondAccepted,
      Option<String> valueAfterStaleWrite,
      Duration freezeToNewLeader,
      Duration electionBound,
      Map<String, List<String>> leadersSeen,
      FenceAuditor auditor,
      String timeline) {}

  private final Class<? extends ElectionCandidate> candidateType;
  private final Duration leaseDuration;
  private final Duration renewDeadline;
  private final Duration retryPeriod;
  private final Map<String, String> childProperties;

  private ElectionScenario(Builder builder) {
    this.candidateType = builder.candidateType;
    this.leaseDuration = builder.leaseDuration;
    this.renewDeadline = builder.renewDeadline;
    this.retryPeriod = builder.retryPeriod;
    this.childProperties = Map.copyOf(builder.childProperties);
  }

  /** A scenario whose candidates run {@code candidateType} (public, no-argument constructor). */
  public static Builder builder(Class<? extends ElectionCandidate> candidateType) {
    return new Builder(candidateType);
  }

  /**
   * Runs the scenario once on {@code election}.
   *
   * @param reader a candidate in this JVM that only reads the resource (it never campaigns)
   */
  public Result run(ElectionCandidate reader, String election, Protection protection)
      throws Exception {
    Timeline timeline = new Timeline();
    FenceAuditor auditor = new FenceAuditor();
    // Liveness limits only: how long a step may take before the run is declared stuck.
    Duration stuck = leaseDuration.multipliedBy(5).plusSeconds(60);
    Duration bound = leaseDuration.plus(Duration.ofNanos((long) (retryPeriod.toNanos() * 1.2)));
    List<ChildJvm> candidates = new ArrayList<>();
    try {
      for (int i = 1; i <= 3; i++) {
        candidates.add(
            ChildJvm.start(
                "candidate-" + i,
                childProperties,
                CandidateMain.class,
                candidateType.getName(),
                election,
                Long.toString(leaseDuration.toMillis()),
                Long.toString(renewDeadline.toMillis()),
                Long.toString(retryPeriod.toMillis()),
                protection.name()));
      }
      for (ChildJvm candidate : candidates) {
        candidate.awaitLine("READY", stuck);
      }
      timeline.add("three candidates campaign, pids " + pids(candidates));

      Elected first = awaitElected(candidates, stuck);
      timeline.add(
          first.describe() + " elected, passed its point-of-no-return check, is about to write");
      List<ChildJvm> followers = new ArrayList<>(candidates);
      followers.remove(first.child);
      for (ChildJvm follower : followers) {
        awaitNewLeader(follower, first.owner, stuck);
      }
      timeline.add("both followers report it as the new leader");

      first.child.signal("STOP");
      first.child.awaitState('T');
      long frozenAt = System.nanoTime();
      timeline.add(
          first.child.name()
              + " frozen with SIGSTOP between its check and its write;"
              + " its renewals are frozen with it");

      Elected second = awaitElected(followers, stuck);
      Duration failover = Duration.ofNanos(System.nanoTime() - frozenAt);
      timeline.add(
          String.format(
              "%s elected %.1f s after the freeze (bound leaseDuration + retryPeriod x 1.2 ="
                  + " %.1f s)",
              second.describe(), seconds(failover), seconds(bound)));
      boolean secondAccepted = write(second, SECOND_VALUE, election, auditor, timeline, stuck);
      ChildJvm third = followers.get(followers.get(0) == second.child ? 1 : 0);
      awaitNewLeader(third, second.owner, stuck);
      timeline.add(third.name() + " reports " + second.child.name() + " as the new leader");

      first.child.send("WRITE " + FIRST_VALUE);
      first.child.signal("CONT");
      timeline.add(
          first.child.name()
              + " resumed with SIGCONT; its write with token "
              + first.token.value()
              + " goes out");
      boolean staleAccepted = outcome(first, election, auditor, stuck);
      timeline.add(
          first.child.name()
              + "'s stale write with token "
              + first.token.value()
              + ": "
              + (staleAccepted
                  ? "ACCEPTED (the double leader's write: a lost update)"
                  : "refused by the fence"));
      Option<String> afterStale = reader.read(election);
      first.child.stop();
      first.child.awaitExit(stuck);

      Option<Replacement> replacement = Option.none();
      List<Elected> leaders = List.of(first, second);
      if (protection == Protection.FENCED) {
        second.child.signal("9");
        second.child.awaitExit(stuck);
        long killedAt = System.nanoTime();
        timeline.add(second.child.name() + " killed with SIGKILL while leading (no release)");

        Elected elected = awaitElected(List.of(third), stuck);
        Duration replaced = Duration.ofNanos(System.nanoTime() - killedAt);
        timeline.add(
            String.format(
                "%s elected %.1f s after the kill (bound %.1f s)",
                elected.describe(), seconds(replaced), seconds(bound)));
        boolean thirdAccepted = write(elected, THIRD_VALUE, election, auditor, timeline, stuck);
        Option<String> finalValue = reader.read(election);
        timeline.add(
            "the resource holds " + finalValue.map(v -> "\"" + v + "\"").getOrElse("nothing"));
        replacement =
            Option.some(new Replacement(elected.term(), thirdAccepted, finalValue, replaced));
        leaders = List.of(first, second, elected);
      }
      for (ChildJvm candidate : List.of(third, second.child)) {
        if (candidate.isAlive()) {
          candidate.stop();
          candidate.awaitExit(stuck);
        }
      }

      Map<String, List<String>> leadersSeen = new LinkedHashMap<>();
      for (Elected leader : leaders) {
        leadersSeen.put(GrantOwner.processOf(leader.owner), newLeaderLines(leader.child));
      }
      return new Result(
          first.term(),
          second.term(),
          replacement,
          staleAccepted,
          secondAccepted,
          afterStale,
          failover,
          bound,
          leadersSeen,
          auditor,
          timeline.toString());
    } finally {
      candidates.forEach(ChildJvm::close);
    }
  }

  /** A candidate that printed {@code ABOUT_TO_WRITE}. */
  private record Elected(ChildJvm child, FencingToken token, String owner) {
    Term term() {
      return new Term(child.name(), child.pid(), owner, token);
    }

    String describe() {
      return child.name() + " (pid " + child.pid() + ") with token " + token.value();
    }
  }

  /**
   * Waits until exactly one of {@code among} has been elected; two at once is a double leader and
   * fails the run.
   */
  private static Elected awaitElected(List<ChildJvm> among, Duration stuck) {
    AtomicReference<Elected> elected = new AtomicReference<>();
    Awaitility.await("a leader among " + names(among))
        .atMost(stuck)
        .pollInterval(Duration.ofMillis(10))
        .until(
            () -> {
              List<Elected> now = new ArrayList<>();
              for (ChildJvm child : among) {
                child
                    .printed("ABOUT_TO_WRITE")
                    .forEach(
                        w ->
                            now.add(
                                new Elected(child, FencingToken.of(Long.parseLong(w[1])), w[2])));
              }
              if (now.size() > 1) {
                throw new AssertionError("Two leaders at once: " + now);
              }
              elected.set(now.isEmpty() ? null : now.get(0));
              return !now.isEmpty();
            });
    return elected.get();
  }

  private static void awaitNewLeader(ChildJvm follower, String leader, Duration stuck)
      throws InterruptedException {
    // Followers name the candidate; the lease (and so the leader's own line) names its grant.
    String line = "NEW_LEADER " + GrantOwner.processOf(leader);
    follower.awaitLine(l -> l.equals(line), line, stuck);
  }

  private static boolean write(
      Elected leader,
      String value,
      String election,
      FenceAuditor auditor,
      Timeline timeline,
      Duration stuck)
      throws IOException, InterruptedException {
    leader.child.send("WRITE " + value);
    boolean accepted = outcome(leader, election, auditor, stuck);
    timeline.add(
        leader.child.name()
            + " wrote with token "
            + leader.token.value()
            + ": "
            + (accepted ? "accepted" : "REFUSED"));
    return accepted;
  }

  /** Waits for the write's {@code ATTEMPTING} and its outcome, and records both. */
  private static boolean outcome(
      Elected leader, String election, FenceAuditor auditor, Duration stuck)
      throws InterruptedException {
    String[] attempting = leader.child.awaitLine("ATTEMPTING", stuck);
    FencingToken token = FencingToken.of(Long.parseLong(attempting[1]));
    auditor.attempted(election, token, leader.owner);
    String[] outcome =
        leader.child.awaitLine(
            l -> l.equals("ACCEPTED") || l.equals("REFUSED"), "ACCEPTED or REFUSED", stuck);
    boolean accepted = outcome[0].equals("ACCEPTED");
    if (accepted) {
      auditor.accepted(election, token, leader.owner);
    } else {
      auditor.refused(election, token, leader.owner);
    }
    return accepted;
  }

  private static List<String> newLeaderLines(ChildJvm child) {
    return child.lines().stream()
        .filter(l -> l.startsWith("NEW_LEADER "))
        .map(l -> l.substring("NEW_LEADER ".length()))
        .toList();
  }

  private static List<Long> pids(List<ChildJvm> children) {
    return children.stream().map(ChildJvm::pid).toList();
  }

  private static List<String> names(List<ChildJvm> children) {
    return children.stream().map(ChildJvm::name).toList();
  }

  private static double seconds(Duration d) {
    return d.toNanos() / 1e9;
  }

  /** Builds an {@link ElectionScenario}. */
  public static final class Builder {
    private final Class<? extends ElectionCandidate> candidateType;
    private Duration leaseDuration = Duration.ofSeconds(5);
    private Duration renewDeadline = Duration.ofSeconds(3);
    private Duration retryPeriod = Duration.ofMillis(500);
    private final Map<String, String> childProperties = new LinkedHashMap<>();

    private Builder(Class<? extends ElectionCandidate> candidateType) {
      this.candidateType = Objects.requireNonNull(candidateType, "candidateType");
    }

    /**
     * The elector's durations. Defaults 5 s, 3 s, 500 ms: long enough that three JVMs starting on
     * two cores do not miss a renewal deadline, short enough for a run of about 20 s.
     */
    public Builder timings(Duration leaseDuration, Duration renewDeadline, Duration retryPeriod) {
      this.leaseDuration = Objects.requireNonNull(leaseDuration, "leaseDuration");
      this.renewDeadline = Objects.requireNonNull(renewDeadline, "renewDeadline");
      this.retryPeriod = Objects.requireNonNull(retryPeriod, "retryPeriod");
      return this;
    }

    /** A system property for the child JVMs, read by the candidate's no-argument constructor. */
    public Builder childSystemProperty(String key, String value) {
      childProperties.put(
          Objects.requireNonNull(key, "key"), Objects.requireNonNull(value, "value"));
      return this;
    }

    public ElectionScenario build() {
      return new ElectionScenario(this);
    }
  }
}
