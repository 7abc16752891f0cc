package dev.nolock.testkit;

import dev.nolock.patterns.FencingToken;
import dev.nolock.patterns.Lease;
import dev.nolock.testkit.internal.PausedHolderMain;
import io.vavr.control.Option;
import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The first of the three tests that prove a lock broken: holders paused with SIGSTOP between their
 * point-of-no-return check and their write, past their lease, then resumed after a new holder has
 * written.
 *
 * <p>Steps of {@link #run}:
 *
 * <ol>
 *   <li>For each paused holder in turn: start a child JVM running the {@link PausableHolder}; it
 *       acquires (after the previous, frozen holder's lease has expired), passes its check and
 *       reports that it is about to write; freeze it with SIGSTOP right there. Its watchdog is
 *       frozen with it, so its lease runs out. (SIGSTOP does not stop {@code nanoTime}: a holder
 *       frozen <em>before</em> its check would stop itself on waking, so the freeze must land after
 *       it, as a GC pause would.)
 *   <li>The new holder, in the test JVM, acquires (a higher token) and writes.
 *   <li>Each paused holder is resumed with SIGCONT; its write goes out with its old token.
 *   <li>The {@link FenceAuditor} holds every attempted, accepted and refused write, in order; the
 *       result carries a timeline in seconds.
 * </ol>
 *
 * With {@link Protection#FENCED} every stale write must be attempted and refused; with {@link
 * Protection#UNFENCED} (the negative control) the auditor must report the lost update. Needs Linux
 * ({@code kill}, {@code /proc}).
 */
public final class PauseScenario {

  /** The outcome of one run. */
  public record Result(
      List<PausedWrite> pausedWrites,
      Lease newHolderLease,
      boolean newHolderAccepted,
      Option<String> finalValue,
      FenceAuditor auditor,
      String timeline) {}

  /** What one paused holder did after it was resumed. */
  public record PausedWrite(
      String owner, FencingToken token, boolean attempted, boolean accepted) {}

  private final Class<? extends PausableHolder> holderType;
  private final Duration ttl;
  private final int pausedHolders;
  private final Map<String, String> childProperties;

  private PauseScenario(Builder builder) {
    this.holderType = builder.holderType;
    this.ttl = builder.ttl;
    this.pausedHolders = builder.pausedHolders;
    this.childProperties = Map.copyOf(builder.childProperties);
  }

  /** A scenario whose paused holders run {@code holderType} (public, no-argument constructor). */
  public static Builder builder(Class<? extends PausableHolder> holderType) {
    return new Builder(holderType);
  }

  /**
   * Runs the scenario once on {@code lockName}.
   *
   * @param newHolder the holder that takes over, in this JVM
   */
  public Result run(PausableHolder newHolder, String lockName, Protection protection)
      throws Exception {
    Timeline timeline = new Timeline();
    FenceAuditor auditor = new FenceAuditor();
    Duration maxWait = ttl.multipliedBy(5).plusSeconds(10);
    List<Child> children = new ArrayList<>();
    try {
      for (int i = 1; i <= pausedHolders; i++) {
        Child child =
            Child.start(
                holderType, childProperties, lockName, ttl, maxWait, "stale-" + i, protection);
        children.add(child);
        String[] about = child.jvm.awaitLine("ABOUT_TO_WRITE", maxWait.plusSeconds(60));
        child.token = FencingToken.of(Long.parseLong(about[1]));
        child.owner = about[2];
        timeline.add(
            "holder "
                + i
                + " (pid "
                + child.jvm.pid()
                + ") acquired token "
                + child.token.value()
                + ", passed its point-of-no-return check, is about to write");
        child.jvm.signal("STOP");
        child.jvm.awaitState('T');
        timeline.add(
            "holder "
                + i
                + " frozen with SIGSTOP between its check and its write;"
                + " a renewal watchdog, if any, is frozen with it");
      }

      Lease lease = newHolder.acquireAndCheck(lockName, ttl, maxWait);
      timeline.add(
          "new holder acquired token "
              + lease.token().value()
              + ": the frozen holders' leases have expired on the lock service");
      auditor.attempted(lockName, lease.token(), lease.owner());
      boolean newAccepted = newHolder.write(lease, "new-holder", protection);
      record(auditor, lockName, lease.token(), lease.owner(), newAccepted);
      timeline.add(
          "new holder wrote with token "
              + lease.token().value()
              + ": "
              + (newAccepted ? "accepted" : "REFUSED"));

      List<PausedWrite> writes = new ArrayList<>();
      for (int i = 0; i < children.size(); i++) {
        Child child = children.get(i);
        child.jvm.go(); // opens the gate: the write goes out once it resumes
        child.jvm.signal("CONT");
        timeline.add(
            "holder "
                + (i + 1)
                + " resumed with SIGCONT; its write with token "
                + child.token.value()
                + " goes out");
        String[] attempting = child.jvm.awaitLine("ATTEMPTING", Duration.ofSeconds(60));
        auditor.attempted(lockName, FencingToken.of(Long.parseLong(attempting[1])), child.owner);
        String[] outcome =
            child.jvm.awaitLine(
                l -> l.equals("ACCEPTED") || l.equals("REFUSED"),
                "ACCEPTED or REFUSED",
                Duration.ofSeconds(60));
        boolean accepted = outcome[0].equals("ACCEPTED");
        record(auditor, lockName, child.token, child.owner, accepted);
        timeline.add(
            "holder "
                + (i + 1)
                + "'s stale write with token "
                + child.token.value()
                + ": "
                + (accepted ? "ACCEPTED (lost update)" : "refused by the fence"));
        child.jvm.awaitExit(Duration.ofSeconds(30));
        writes.add(new PausedWrite(child.owner, child.token, true, accepted));
      }
      Option<String> value = newHolder.read(lockName);
      timeline.add("the resource holds " + value.map(v -> "\"" + v + "\"").getOrElse("nothing"));
      return new Result(writes, lease, newAccepted, value, auditor, timeline.toString());
    } finally {
      children.forEach(child -> child.jvm.close());
    }
  }

  private static void record(
      FenceAuditor auditor, String lock, FencingToken token, String owner, boolean accepted) {
    if (accepted) {
      auditor.accepted(lock, token, owner);
    } else {
      auditor.refused(lock, token, owner);
    }
  }

  /** Builds a {@link PauseScenario}. */
  public static final class Builder {
    private final Class<? extends PausableHolder> holderType;
    private Duration ttl = Duration.ofSeconds(3);
    private int pausedHolders = 1;
    private final Map<String, String> childProperties = new LinkedHashMap<>();

    private Builder(Class<? extends PausableHolder> holderType) {
      this.holderType = Objects.requireNonNull(holderType, "holderType");
    }

    /** The lease TTL; at least 3 s, so that JVM start-up on 2 cores does not eat it. */
    public Builder ttl(Duration ttl) {
      if (ttl.compareTo(Duration.ofSeconds(3)) < 0) {
        throw new IllegalArgumentException(
            "A pause scenario needs a TTL of at least 3 s (child JVMs start slowly on small"
                + " machines), got "
                + ttl);
      }
      this.ttl = ttl;
      return this;
    }

    /** How many holders are frozen, one after another, before the new holder takes over. */
    public Builder pausedHolders(int count) {
      if (count < 1 || count > 5) {
        throw new IllegalArgumentException("pausedHolders must be 1 to 5, got " + count);
      }
      this.pausedHolders = count;
      return this;
    }

    /** A system property for the child JVMs, read by the holder's no-argument constructor. */
    public Builder childSystemProperty(String key, String value) {
      childProperties.put(
          Objects.requireNonNull(key, "key"), Objects.requireNonNull(value, "value"));
      return this;
    }

    public PauseScenario build() {
      return new PauseScenario(this);
    }
  }

  /** A paused holder's JVM ({@link PausedHolderMain}) and the lease it reported. */
  private static final class Child {
    private final ChildJvm jvm;
    private FencingToken token;
    private String owner;

    private Child(ChildJvm jvm) {
      this.jvm = jvm;
    }

    static Child start(
        Class<? extends PausableHolder> holderType,
        Map<String, String> properties,
        String lockName,
        Duration ttl,
        Duration maxWait,
        String value,
        Protection protection)
        throws IOException {
      return new Child(
          ChildJvm.start(
              "paused holder " + value,
              properties,
              PausedHolderMain.class,
              holderType.getName(),
              lockName,
              Long.toString(ttl.toMillis()),
              Long.toString(maxWait.toMillis()),
              value,
              protection.name()));
    }
  }
}
