package dev.nolock.benchmarks;

import dev.nolock.benchmarks.Catalog.Entry;
import dev.nolock.benchmarks.Catalog.Role;
import dev.nolock.benchmarks.Catalog.Safety;
import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.ZoneOffset;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import org.HdrHistogram.Histogram;

/**
 * Writes {@code summary.md} (every table), {@code report.html} (the same tables with charts) and
 * {@code turns.csv} (every measured turn of the paired runs).
 *
 * <p>Every JMH ratio comes from a paired run ({@link Paired}, {@link PairedStats}): the median of
 * the per-block ratios, with a 95 % bootstrap interval over whole blocks. A verdict is "met" only
 * when the interval's lower bound reaches the goal, "not met" only when its upper bound falls
 * short, and undecided otherwise.
 */
final class Report {

  /**
   * One measured figure.
   *
   * @param okPerSecond units of protected work done per second (the median block rate of JMH's
   *     {@code ok} counter, or the harness's rate)
   * @param okLow the lower bound of its 95 % interval (the rate itself for a harness: one run)
   * @param okHigh the upper bound
   * @param blocks the blocks it was measured in (1 for a harness: no interval, never a winner)
   * @param attemptsPerSecond attempts per second (JMH's primary score, median block rate)
   */
  record Figure(
      Entry entry,
      int threads,
      int keys,
      double okPerSecond,
      double okLow,
      double okHigh,
      int blocks,
      double attemptsPerSecond,
      Map<String, String> detail) {}

  /** A goal of benchmarks/GOALS.md and what this run says about it. */
  record Goal(String goal, String status, String evidence) {}

  /** A workload shape and the design that won it. */
  record Recommendation(String shape, String winner, String margin, String basis) {}

  private final Main.RunRecord run;
  private final List<Figure> figures;

  private Report(Main.RunRecord run) {
    this.run = run;
    this.figures = run.figures;
  }

  static void write(Path out, Main.RunRecord run) throws IOException {
    Report report = new Report(run);
    Files.writeString(out.resolve("summary.md"), report.markdown());
    Files.writeString(out.resolve("report.html"), report.html());
    StringBuilder csv =
        new StringBuilder("variant,threads,keys,block,position,ok_per_s,attempts_per_s\n");
    for (Paired.Turn t : run.turns) {
      csv.append(
          String.format(
              Locale.ROOT,
              "%s,%d,%d,%d,%d,%.3f,%.3f%n",
              t.id(),
              t.threads(),
              t.keys(),
              t.block(),
              t.position(),
              t.ok(),
              t.attempts()));
    }
    Files.writeString(out.resolve("turns.csv"), csv.toString());
  }

  // ---------------------------------------------------------------- the figures

  private Optional<Figure> find(String id, int threads, int keys) {
    return figures.stream()
        .filter(f -> f.entry().id().equals(id) && f.threads() == threads && f.keys() == keys)
        .findFirst();
  }

  /**
   * {@code a / b} in one cell: paired, with its interval and order effect; for the harnesses, one
   * run each (an interval of one point, which {@link #status} never grades).
   */
  private Optional<PairedStats.Ratio> ratio(Optional<Figure> a, Optional<Figure> b) {
    if (a.isEmpty() || b.isEmpty() || b.get().okPerSecond() <= 0) {
      return Optional.empty();
    }
    if (a.get().entry().isHarness()) {
      double r = a.get().okPerSecond() / b.get().okPerSecond();
      return Optional.of(
          new PairedStats.Ratio(new PairedStats.Estimate(r, r, r, 1), Double.NaN, Double.NaN));
    }
    return PairedStats.ratio(
        run.turns, a.get().entry().id(), b.get().entry().id(), a.get().threads(), a.get().keys());
  }

  static String ratioText(Optional<PairedStats.Ratio> ratio) {
    return ratio
        .map(PairedStats.Ratio::estimate)
        .map(
            e ->
                e.blocks() < 2
                    ? String.format(Locale.ROOT, "%.2f× (one run, no interval)", e.median())
                    : String.format(
                        Locale.ROOT, "%.2f× [%.2f, %.2f]", e.median(), e.low(), e.high()))
        .orElse("—");
  }

  /** The order effect of a paired ratio: its median when the design ran first, and second. */
  static String orderText(Optional<PairedStats.Ratio> ratio) {
    return ratio
        .filter(r -> !Double.isNaN(r.designFirst()))
        .map(
            r ->
                String.format(
                    Locale.ROOT, "%.2f× first / %.2f× second", r.designFirst(), r.referenceFirst()))
        .orElse("");
  }

  private String keysLabel(Entry entry, int keys) {
    if (keys == 0) {
      return "—";
    }
    if (entry.group().equals(Catalog.IDEMPOTENCY)) {
      return keys == 1 ? "one key (replays)" : "a fresh key per call";
    }
    if (entry.group().equals(Catalog.QUEUE)) {
      return "one queue";
    }
    return keys == 1 ? "hot key" : String.format(Locale.ROOT, "%,d keys", keys);
  }

  // ---------------------------------------------------------------- recommendations

  private List<Recommendation> recommendations() {
    List<Recommendation> rows = new ArrayList<>();
    int threads =
        run.profile.threads().stream().filter(t -> t <= 4).max(Integer::compare).orElse(1);
    // Designs that can stand in for each other: one row or key guarded on PostgreSQL or Redis. The
    // DynamoDB figures come from dynalite, one Node.js process, and say nothing about DynamoDB.
    List<String> contest =
        List.of(Catalog.CAS, Catalog.PG_LOCK, Catalog.ADVISORY, Catalog.REDIS_LOCK);
    for (int keys : List.of(1, 10_000)) {
      String where = (keys == 1 ? "Hot key" : "10,000 keys") + ", " + threads + " threads";
      rows.add(
          winner(
              where + ", short critical section, correctness (a stale writer must be refused)",
              f ->
                  contest.contains(f.entry().group())
                      && f.entry().role() == Role.DESIGN
                      && f.entry().safety() == Safety.CORRECTNESS,
              threads,
              keys));
      rows.add(
          winner(
              where + ", short critical section, efficiency (a rare duplicate is tolerable)",
              f -> contest.contains(f.entry().group()) && f.entry().role() != Role.RAW,
              threads,
              keys));
    }
    long stallMs = run.profile.stall().toMillis();
    convoyWinner(run.convoy)
        .ifPresent(
            text ->
                rows.add(
                    new Recommendation(
                        "One participant stalls "
                            + stallMs
                            + " ms inside its unit (a long critical"
                            + " section), hot resource, correctness",
                        text[0],
                        text[1],
                        "convoy scenario: the others' p99, p99.9 and max while the stall lasts")));
    int drainThreads = 4;
    Optional<Figure> pool =
        figures.stream().filter(f -> f.entry().id().equals("queueDrainWorkerPool")).findFirst();
    Optional<Figure> dbScheduler =
        figures.stream().filter(f -> f.entry().id().equals("queueDrainDbScheduler")).findFirst();
    if (pool.isPresent() && dbScheduler.isPresent()) {
      // One run each, in a fixed order, no interval: it decides nothing, as the goals say.
      rows.add(
          new Recommendation(
              "Background jobs, many workers ("
                  + drainThreads
                  + " threads), at-least-once with a"
                  + " fenced completion",
              "undecided (one run each, no interval)",
              String.format(
                  Locale.ROOT,
                  "WorkerPool %s vs db-scheduler %s jobs/s (%.2f×)",
                  Svg.compact(pool.get().okPerSecond()),
                  Svg.compact(dbScheduler.get().okPerSecond()),
                  pool.get().okPerSecond() / dbScheduler.get().okPerSecond()),
              "queue drain harness, one run each (no interval)"));
    }
    return rows;
  }

  /**
   * The candidate with the most successful units per second, named only when its interval's lower
   * bound clears the runner-up's upper bound; otherwise every candidate whose interval reaches the
   * leader's is named as a tie.
   */
  private Recommendation winner(String shape, Predicate<Figure> candidate, int threads, int keys) {
    List<Figure> ranked =
        figures.stream()
            .filter(f -> f.threads() == threads && f.keys() == keys)
            .filter(candidate)
            .sorted(Comparator.comparingDouble(Figure::okPerSecond).reversed())
            .toList();
    if (ranked.isEmpty()) {
      return new Recommendation(shape, "not measured", "—", "—");
    }
    List<String> peersMissing =
        Catalog.ENTRIES.stream()
            .filter(e -> e.role() == Role.PEER && run.skipped.containsKey(e.id()))
            .filter(e -> candidate.test(new Figure(e, threads, keys, 0, 0, 0, 0, 0, Map.of())))
            .map(Entry::label)
            .toList();
    String basis =
        "paired JMH runs, successful units per second, "
            + ranked.size()
            + " candidates"
            + (peersMissing.isEmpty() ? "" : "; not measured: " + String.join(", ", peersMissing));
    Figure best = ranked.get(0);
    if (ranked.size() < 2) {
      return new Recommendation(shape, name(best), "only candidate measured", basis);
    }
    Figure second = ranked.get(1);
    if (clearWinner(ranked)) {
      return new Recommendation(
          shape,
          name(best),
          String.format(
              Locale.ROOT,
              "%.2f× the next, %s (%s [%s, %s] vs %s [%s, %s] units/s)",
              best.okPerSecond() / Math.max(second.okPerSecond(), 1e-9),
              second.entry().label(),
              Svg.compact(best.okPerSecond()),
              Svg.compact(best.okLow()),
              Svg.compact(best.okHigh()),
              Svg.compact(second.okPerSecond()),
              Svg.compact(second.okLow()),
              Svg.compact(second.okHigh())),
          basis);
    }
    List<Figure> reaching = ranked.stream().filter(f -> f.okHigh() >= best.okLow()).toList();
    // Clear of every interval but measured in other paired runs: undecided between the leader and
    // those runs' best, never a "tie" of one.
    boolean acrossRuns = reaching.size() == 1;
    List<Figure> tied = acrossRuns ? List.of(best, second) : reaching;
    return new Recommendation(
        shape,
        "tie: " + tied.stream().map(Report::name).collect(Collectors.joining("; ")),
        (acrossRuns ? "measured in different paired runs: " : "intervals overlap: ")
            + tied.stream()
                .map(
                    f ->
                        String.format(
                            Locale.ROOT,
                            "%s [%s, %s]",
                            Svg.compact(f.okPerSecond()),
                            Svg.compact(f.okLow()),
                            Svg.compact(f.okHigh())))
                .collect(Collectors.joining(" vs "))
            + " units/s",
        basis);
  }

  /**
   * Whether the first of {@code ranked} (by median) wins outright: its interval clears every other
   * candidate's, not only the runner-up's (a third with a lower median can have a wider interval
   * that reaches it), and all were measured in the same paired run (figures of two runs minutes
   * apart differ by the machine's drift, which neither interval contains). A figure of one block
   * has no interval: it can tie but never win.
   */
  static boolean clearWinner(List<Figure> ranked) {
    Figure best = ranked.get(0);
    return ranked.stream().allMatch(f -> f.blocks() >= 2)
        && ranked.stream().allMatch(f -> f.entry().source() == best.entry().source())
        && ranked.stream().skip(1).allMatch(f -> f.okHigh() < best.okLow());
  }

  private static String name(Figure f) {
    return f.entry().label() + " — " + f.entry().group();
  }

  // ---------------------------------------------------------------- goals

  private List<Goal> goals() {
    List<Goal> goals = new ArrayList<>();
    for (Entry design : Catalog.ENTRIES) {
      if (design.role() != Role.DESIGN) {
        continue;
      }
      Optional<Entry> raw = Catalog.rawOf(design);
      List<String> parts = new ArrayList<>();
      List<PairedStats.Ratio> ratios = new ArrayList<>();
      for (Figure f : figures) {
        if (!f.entry().equals(design) || raw.isEmpty()) {
          continue;
        }
        Optional<PairedStats.Ratio> r =
            ratio(Optional.of(f), find(raw.get().id(), f.threads(), f.keys()));
        if (r.isPresent()) {
          ratios.add(r.get());
          parts.add(f.threads() + "t/" + keysLabel(design, f.keys()) + ": " + ratioText(r));
        }
      }
      String goal = design.label() + " ≥ 0.9× its raw floor (" + design.group() + ")";
      if (parts.isEmpty()) {
        goals.add(new Goal(goal, "not measured", skippedReason(design.id())));
      } else {
        goals.add(new Goal(goal, floorStatus(ratios, 0.9), String.join("; ", parts)));
      }
    }
    figures.stream()
        .filter(f -> f.entry().id().equals("queueDrainWorkerPool"))
        .findFirst()
        .ifPresentOrElse(
            f -> {
              double decay =
                  Double.parseDouble(f.detail().getOrDefault("lastTenthOverSecond", "NaN"));
              boolean full = run.profile.queueJobs() >= 2_000_000;
              goals.add(
                  new Goal(
                      "The queue holds ≥ 0.9× its starting rate over 2,000,000 jobs",
                      (decay >= 0.9 ? "met" : "not met")
                          + (full
                              ? ""
                              : " (over "
                                  + String.format(Locale.ROOT, "%,d", run.profile.queueJobs())
                                  + " jobs only: the 2M check is --long)"),
                      String.format(Locale.ROOT, "last tenth / second tenth = %.2f", decay)));
            },
            () ->
                goals.add(
                    new Goal(
                        "The queue holds ≥ 0.9× its starting rate over 2,000,000 jobs",
                        "not measured",
                        skippedReason("queueDrainWorkerPool"))));
    goals.add(
        peerGoal(
            "The queue beats db-scheduler ≥ 2×",
            "queueDrainWorkerPool",
            "queueDrainDbScheduler",
            2.0));
    goals.add(
        peerGoal(
            "Redis fenced lock ≥ Redisson RLock (lock cycles/s)",
            "lockRedisFenced",
            "lockRedissonRLock",
            1.0));
    goals.add(
        peerGoal(
            "PostgreSQL fenced lock ≥ ShedLock JDBC (lock cycles/s)",
            "lockPostgresFenced",
            "lockShedLockJdbc",
            1.0));
    goals.add(
        peerGoal(
            "CAS store ≥ jOOQ optimistic locking (successful updates/s)",
            "casVersionColumnStore",
            "casJooqOptimisticLocking",
            1.0));
    long stallNanos = run.profile.stall().toNanos();
    for (ConvoyHarness.Result r : run.convoy) {
      if (r.lockFree()) {
        goals.add(
            new Goal(
                r.design()
                    + ": others' p99 within 2× of the no-stall p99 through a "
                    + run.profile.stall().toMillis()
                    + " ms stall",
                r.p99Ratio() <= 2 ? "met" : "not met",
                String.format(
                    Locale.ROOT,
                    "p99 %.1f ms before, %.1f ms during (%.2f×)",
                    ms(r.before().getValueAtPercentile(99)),
                    ms(r.during().getValueAtPercentile(99)),
                    r.p99Ratio())));
      } else {
        goals.add(
            new Goal(
                r.design() + ": the report shows the convoy (others' p99 ≥ the stall)",
                r.during().getValueAtPercentile(99) >= stallNanos * 0.9 ? "shown" : "not shown",
                String.format(
                    Locale.ROOT,
                    "p99 %.1f ms before, %.1f ms during",
                    ms(r.before().getValueAtPercentile(99)),
                    ms(r.during().getValueAtPercentile(99)))));
      }
    }
    goals.addAll(starvationGoals(run.convoy));
    goals.addAll(casWorstCaseGoals(run.convoy));
    long growth = run.heapAtEnd - run.heapAtStart;
    goals.add(
        new Goal(
            "Heap steady across the run's long-running components (WorkerPool, PartitionOwner,"
                + " convoy)",
            run.profile.queueJobs() >= 1_000_000
                ? (growth < 64L << 20 ? "met" : "not met")
                : "indicative only (fewer than 1M operations in this profile; --long runs 2M jobs)",
            String.format(
                Locale.ROOT,
                "heap after a full GC: %.1f MiB at the start, %.1f MiB at the end",
                run.heapAtStart / 1048576.0,
                run.heapAtEnd / 1048576.0)));
    return goals;
  }

  private Goal peerGoal(String goal, String ours, String peer, double needed) {
    List<String> parts = new ArrayList<>();
    List<PairedStats.Ratio> ratios = new ArrayList<>();
    for (Figure f : figures) {
      if (!f.entry().id().equals(ours)) {
        continue;
      }
      Optional<PairedStats.Ratio> r = ratio(Optional.of(f), find(peer, f.threads(), f.keys()));
      if (r.isPresent()) {
        ratios.add(r.get());
        parts.add(f.threads() + "t/" + keysLabel(f.entry(), f.keys()) + ": " + ratioText(r));
      }
    }
    if (parts.isEmpty()) {
      return new Goal(goal, "not measured", skippedReason(ours) + " " + skippedReason(peer));
    }
    return new Goal(goal, status(ratios, needed), String.join("; ", parts));
  }

  /**
   * The verdict of a goal over its ratios (one per cell): "met" only when every interval's lower
   * bound reaches {@code needed}; "not met" when one interval's upper bound falls short; otherwise
   * undecided. A ratio of one run (a harness) has no interval and decides nothing.
   */
  static String status(List<PairedStats.Ratio> ratios, double needed) {
    List<PairedStats.Estimate> estimates =
        ratios.stream().map(PairedStats.Ratio::estimate).toList();
    if (estimates.stream().anyMatch(e -> e.blocks() >= 2 && e.high() < needed)) {
      return "not met";
    }
    if (estimates.stream().anyMatch(e -> e.blocks() < 2)) {
      return estimates.stream().allMatch(e -> e.median() >= needed)
          ? "undecided (one run, no interval; at the goal)"
          : "undecided (one run, no interval; short of the goal)";
    }
    if (estimates.stream().allMatch(e -> e.low() >= needed)) {
      return "met";
    }
    return "undecided (an interval spans the goal: more blocks, scripts/bench --long, would"
        + " narrow it)";
  }

  /**
   * {@link #status} for a design against its own floor, which does the same work: a design whose
   * interval lies wholly above 1 in some cell beats the floor there, which means the two do not
   * measure the same thing; that is flagged to be explained. A cell that falls short still makes
   * the goal "not met": an artefact elsewhere never hides it.
   */
  static String floorStatus(List<PairedStats.Ratio> ratios, double needed) {
    String status = status(ratios, needed);
    boolean beatsFloor =
        ratios.stream()
            .map(PairedStats.Ratio::estimate)
            .anyMatch(e -> e.blocks() >= 2 && e.low() > 1);
    if (!beatsFloor) {
      return status;
    }
    String artefact = "artefact: beats its own floor beyond the interval in a cell (to explain)";
    return status.equals("not met") ? "not met; also " + artefact : artefact;
  }

  private String skippedReason(String id) {
    return Optional.ofNullable(run.skipped.get(id)).map(r -> id + ": " + r).orElse("");
  }

  private static double ms(long nanos) {
    return nanos / 1e6;
  }

  // ---------------------------------------------------------------- text

  private String header(boolean html) {
    Runtime runtime = Runtime.getRuntime();
    long memory =
        ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
            .getTotalMemorySize();
    String command =
        System.getProperty("nolock.bench.command", "java -jar benchmarks/target/benchmarks.jar");
    List<String> lines = new ArrayList<>();
    lines.add(
        "Date: "
            + DateTimeFormatter.ISO_LOCAL_DATE_TIME
                .format(run.started.atOffset(ZoneOffset.UTC))
                .substring(0, 19)
            + " UTC; took "
            + Duration.between(run.started, run.finished).toSeconds()
            + " s");
    lines.add(
        String.format(
            Locale.ROOT,
            "Machine: %d cores, %.1f GiB memory, %s %s, Java %s",
            runtime.availableProcessors(),
            memory / 1073741824.0,
            System.getProperty("os.name"),
            System.getProperty("os.version"),
            System.getProperty("java.version")));
    lines.add("Command: `" + command + "`");
    // scripts/bench passes the checkout's commit, so a report can be traced to the code it
    // measured.
    lines.add(
        "Commit: "
            + System.getProperty(
                "nolock.bench.commit", "unknown (run through scripts/bench to record it)"));
    lines.add(
        "Profile: "
            + run.profile.name()
            + " (JMH, paired: every variant in a JVM of its own for the whole run, "
            + String.join(" ", Main.workerJvmArgs())
            + "; per cell "
            + run.profile.blocks()
            + " blocks, each a palindrome of "
            + run.profile.turn().toMillis()
            + " ms turns, each a JMH trial on PostgreSQL tables built afresh; an unmeasured turn of"
            + " "
            + run.profile.warmup().toMillis()
            + " ms per variant in the first cell it runs in; threads "
            + run.profile.threads()
            + "; keys "
            + run.profile.keys()
            + "; peers at the same keys and threads "
            + run.profile.peerThreads()
            + ")");
    lines.add(
        "Runner JVM: "
            + String.join(" ", ManagementFactory.getRuntimeMXBean().getInputArguments())
            + "; GC "
            + ManagementFactory.getGarbageCollectorMXBeans().stream()
                .map(java.lang.management.GarbageCollectorMXBean::getName)
                .collect(Collectors.joining(", ")));
    run.serverSettings.forEach((name, value) -> lines.add("PostgreSQL " + name + ": " + value));
    for (Servers.Use use : run.servers.values()) {
      lines.add(
          "Server " + use.server() + ": " + (use.available() ? "" : "UNAVAILABLE — ") + use.how());
    }
    return lines.stream()
            .map(l -> (html ? "<li>" + inline(l) + "</li>" : "- " + l))
            .collect(Collectors.joining("\n"))
        + "\n";
  }

  private static final String READING =
      "Each JMH invocation makes one attempt and never retries: a lost CAS, a lock held by another"
          + " thread, a duplicate in progress or an empty queue counts as a conflict. The tables"
          + " rank by successful units per second (`ok/s`); `attempts/s` is every try. Every"
          + " variant of a benchmark runs in turns with the others, in its own JVM, in palindromic"
          + " blocks (A B B A), on tables reset before each turn; a figure is the median over the"
          + " blocks and [low, high] its 95 % bootstrap interval over whole blocks. A ratio is the"
          + " median of the per-block ratios; \"first / second\" gives it over the half-blocks"
          + " where the design ran before its reference and after it, so an order effect is"
          + " visible. \"Guarantee\" says whether a stale holder's write is refused (a fence,"
          + " version, attempt token or transaction) or can still land (no fence), and how many"
          + " round trips one successful unit makes, counted on the wire at 10,000 keys and one"
          + " thread. A goal is met only when the lower bound reaches it, not met only when the"
          + " upper bound falls short. This machine has 2 cores: at 4 threads (16 in --long) the"
          + " figures partly measure the scheduler, and the servers share the cores with the"
          + " benchmark. Compare ratios, not absolute rates across runs (every turn is in"
          + " turns.csv). Every verdict and recommendation here comes from this one run: an"
          + " interval covers the variation between its blocks, not between runs, and two"
          + " default runs have disagreed on some verdicts, so take one as decided only when a"
          + " second run agrees. A recommendation names a winner only among candidates measured"
          + " in the same paired run; the queue drains and the ownership harness run once each,"
          + " in a fixed order (floor first), and decide nothing.";

  private String markdown() {
    StringBuilder md = new StringBuilder();
    md.append("# nolock benchmark report\n\n").append(header(false)).append('\n');
    md.append("How to read it: ").append(READING).append("\n\n");
    md.append(
        "## Recommendation\n\n"
            + "| workload shape | winner | by how much | measured by |\n"
            + "|---|---|---|---|\n");
    for (Recommendation r : recommendations()) {
      md.append("| ")
          .append(r.shape())
          .append(" | ")
          .append(r.winner())
          .append(" | ")
          .append(r.margin())
          .append(" | ")
          .append(r.basis())
          .append(" |\n");
    }
    md.append("\n## Goals (benchmarks/GOALS.md)\n\n| goal | status | evidence |\n|---|---|---|\n");
    for (Goal g : goals()) {
      md.append("| ")
          .append(g.goal())
          .append(" | **")
          .append(g.status())
          .append("** | ")
          .append(g.evidence())
          .append(" |\n");
    }
    md.append("\n## Throughput and ratios\n");
    for (String group : Catalog.groups()) {
      md.append("\n### ").append(group).append("\n\n");
      md.append(
          "| variant | role | guarantee; round trips per unit | threads | keys | ok/s [95 %"
              + " interval] | attempts/s | ratio to raw | order effect |\n"
              + "|---|---|---|---|---|---|---|---|---|\n");
      for (Figure f : groupFigures(group)) {
        md.append(
            String.format(
                Locale.ROOT,
                "| %s | %s | %s | %d | %s | %s | %s | %s | %s |%n",
                f.entry().label(),
                f.entry().role().name().toLowerCase(Locale.ROOT),
                guarantee(f.entry()),
                f.threads(),
                keysLabel(f.entry(), f.keys()),
                okText(f),
                Svg.compact(f.attemptsPerSecond()),
                ratioToRaw(f),
                orderText(toRaw(f))));
        if (!f.detail().isEmpty()) {
          md.append("| ↳ ").append(detailText(f)).append(" | | | | | | | | |\n");
        }
      }
      for (Entry e : Catalog.ENTRIES) {
        if (e.group().equals(group) && run.skipped.containsKey(e.id())) {
          md.append("| ")
              .append(e.label())
              .append(" | skipped | ")
              .append(guarantee(e))
              .append(" | | | ")
              .append(run.skipped.get(e.id()))
              .append(" | | | |\n");
        }
      }
    }
    md.append("\n## Convoy: one participant stalls ")
        .append(run.profile.stall().toMillis())
        .append(" ms\n\n")
        .append(convoyIntro())
        .append("\n\n");
    md.append("| ")
        .append(String.join(" | ", CONVOY_COLUMNS))
        .append(" |\n|")
        .append("---|".repeat(CONVOY_COLUMNS.size()))
        .append('\n');
    for (List<String> row : convoyRows()) {
      md.append("| ").append(String.join(" | ", row)).append(" |\n");
    }
    return md.toString();
  }

  private String convoyIntro() {
    return ConvoyHarness.WORKERS
        + " workers share one hot resource; one more participant stops for "
        + run.profile.stall().toMillis()
        + " ms in the middle of its unit (a lock holder inside its critical section; a CAS writer"
        + " inside its change in its turn on the row, which PostgreSQL ends after 1 s idle, or in"
        + " the store's lock-free mode between its read and its write; a queue"
        + " worker between claim and complete). Latency is each unit from its first attempt to done"
        + " (waits and retries included): before = done before the stall began, during = in flight"
        + " at any time during it, after = started after it ended; units/s counts units by when"
        + " they completed; units = how many the phase holds (in a phase of a handful, p99 is the"
        + " max). Phases of "
        + run.profile.convoyPhase().toSeconds()
        + " s before and after. Attempts per unit: the requests a unit sent for the resource (lock"
        + " requests, conditional writes, claims); gave up: units the design gave up on, whose"
        + " latency is recorded to the give-up and so flatters the row. Every design runs with its"
        + " defaults except one of the two CAS writers, whose retry policy allows "
        + ConvoyHarness.CAS_MAX_ATTEMPTS
        + " attempts so that its latencies include every unit; the fenced locks wait up to "
        + ConvoyHarness.MAX_WAIT.toSeconds()
        + " s to acquire.";
  }

  private List<Figure> groupFigures(String group) {
    return figures.stream()
        .filter(f -> f.entry().group().equals(group))
        .sorted(
            Comparator.<Figure>comparingInt(f -> f.keys())
                .thenComparingInt(Figure::threads)
                .thenComparingInt(f -> f.entry().role().ordinal()))
        .toList();
  }

  private Optional<PairedStats.Ratio> toRaw(Figure f) {
    if (f.entry().role() == Role.RAW) {
      return Optional.empty();
    }
    return Catalog.rawOf(f.entry())
        .flatMap(raw -> ratio(Optional.of(f), find(raw.id(), f.threads(), f.keys())));
  }

  /**
   * The convoy's winner and by how much, among the designs that gave up on no unit during the
   * stall: the design with the lowest p99 during the stall wins only when its p99.9 and max are no
   * higher than the runner-up's too (a phase holds few units, so one slow unit is its tail);
   * otherwise the two tie, each better at one end.
   */
  static Optional<String[]> convoyWinner(List<ConvoyHarness.Result> convoy) {
    List<ConvoyHarness.Result> ranked =
        convoy.stream()
            // A unit given up on ends early: its latency flatters the design it failed.
            .filter(r -> r.giveUps().during() == 0)
            .sorted(Comparator.comparingLong(r -> r.during().getValueAtPercentile(99)))
            .toList();
    if (ranked.isEmpty()) {
      return Optional.empty();
    }
    ConvoyHarness.Result best = ranked.get(0);
    if (ranked.size() == 1) {
      return Optional.of(new String[] {best.design(), "only design measured"});
    }
    ConvoyHarness.Result second = ranked.get(1);
    String figures =
        String.format(
            Locale.ROOT,
            "p99 / p99.9 / max %.1f / %.1f / %.1f ms (%d units) vs %.1f / %.1f / %.1f ms (%d"
                + " units, %s)",
            ms(best.during().getValueAtPercentile(99)),
            ms(best.during().getValueAtPercentile(99.9)),
            ms(best.during().getMaxValue()),
            best.during().getTotalCount(),
            ms(second.during().getValueAtPercentile(99)),
            ms(second.during().getValueAtPercentile(99.9)),
            ms(second.during().getMaxValue()),
            second.during().getTotalCount(),
            second.design());
    boolean beatsAll =
        ranked.stream()
            .skip(1)
            .allMatch(
                other ->
                    best.during().getValueAtPercentile(99) < other.during().getValueAtPercentile(99)
                        && best.during().getValueAtPercentile(99.9)
                            <= other.during().getValueAtPercentile(99.9)
                        && best.during().getMaxValue() <= other.during().getMaxValue());
    if (beatsAll) {
      return Optional.of(new String[] {best.design(), figures});
    }
    // The first design the leader does not beat: as low a p99, or a lower p99.9 or max.
    ConvoyHarness.Result rival =
        ranked.stream()
            .skip(1)
            .filter(
                o ->
                    o.during().getValueAtPercentile(99) <= best.during().getValueAtPercentile(99)
                        || o.during().getValueAtPercentile(99.9)
                            < best.during().getValueAtPercentile(99.9)
                        || o.during().getMaxValue() < best.during().getMaxValue())
            .findFirst()
            .orElseThrow();
    boolean sameP99 =
        rival.during().getValueAtPercentile(99) <= best.during().getValueAtPercentile(99);
    return Optional.of(
        new String[] {
          sameP99
              ? "tie: " + best.design() + "; " + rival.design() + " (same p99)"
              : "tie: " + best.design() + " (lower p99); " + rival.design() + " (lower tail)",
          figures
        });
  }

  /** What a row guarantees a stale writer, and what one successful unit costs on the wire. */
  static String guarantee(Entry entry) {
    return (entry.safety() == Safety.CORRECTNESS ? "stale write refused" : "no fence")
        + "; "
        + entry.roundTrips();
  }

  private String ratioToRaw(Figure f) {
    return f.entry().role() == Role.RAW ? "1 (floor)" : ratioText(toRaw(f));
  }

  private static String okText(Figure f) {
    return f.okLow() == f.okHigh()
        ? Svg.compact(f.okPerSecond()) + " (one run)"
        : Svg.compact(f.okPerSecond())
            + " ["
            + Svg.compact(f.okLow())
            + ", "
            + Svg.compact(f.okHigh())
            + "]";
  }

  private static String detailText(Figure f) {
    return f.detail().entrySet().stream()
        .sorted(Map.Entry.comparingByKey())
        .map(e -> e.getKey() + " " + e.getValue())
        .collect(Collectors.joining(", "));
  }

  // ---------------------------------------------------------------- html

  private String html() {
    StringBuilder html = new StringBuilder();
    html.append(
            "<!doctype html><html><head><meta charset='utf-8'><title>nolock benchmark"
                + " report</title>\n")
        .append(
            "<style>body{font-family:sans-serif;max-width:1100px;margin:2em"
                + " auto;color:#222}table{border-collapse:collapse;margin:1em 0}td,th{border:1px"
                + " solid #ccc;padding:3px"
                + " 7px;font-size:13px;text-align:left}th{background:#f0f0f0}.met,.shown{color:#1a7f37;font-weight:bold}.not{color:#c62828;font-weight:bold}</style></head><body>\n");
    html.append("<h1>nolock benchmark report</h1><ul>").append(header(true)).append("</ul>\n");
    html.append("<p>").append(inline(READING)).append("</p>\n");
    html.append("<h2>Recommendation</h2>")
        .append(
            table(
                List.of("workload shape", "winner", "by how much", "measured by"),
                recommendations().stream()
                    .map(r -> List.of(r.shape(), r.winner(), r.margin(), r.basis()))
                    .toList()));
    html.append(
        "<h2>Goals"
            + " (benchmarks/GOALS.md)</h2><table><tr><th>goal</th><th>status</th><th>evidence</th></tr>\n");
    for (Goal g : goals()) {
      String css =
          g.status().startsWith("met")
              ? "met"
              : g.status().startsWith("shown")
                  ? "shown"
                  : g.status().startsWith("not") ? "not" : "";
      html.append("<tr><td>")
          .append(Svg.escape(g.goal()))
          .append("</td><td class='")
          .append(css)
          .append("'>")
          .append(Svg.escape(g.status()))
          .append("</td><td>")
          .append(Svg.escape(g.evidence()))
          .append("</td></tr>\n");
    }
    html.append("</table>\n<h2>Throughput against threads and contention</h2>\n");
    for (String group : Catalog.groups()) {
      List<Figure> groupFigures = groupFigures(group);
      html.append("<h3>").append(Svg.escape(group)).append("</h3>\n");
      if (!groupFigures.isEmpty()) {
        html.append(chart(group, groupFigures));
      }
      List<List<String>> rows = new ArrayList<>();
      for (Figure f : groupFigures) {
        rows.add(
            List.of(
                f.entry().label(),
                f.entry().role().name().toLowerCase(Locale.ROOT),
                guarantee(f.entry()),
                Integer.toString(f.threads()),
                keysLabel(f.entry(), f.keys()),
                okText(f),
                Svg.compact(f.attemptsPerSecond()),
                ratioToRaw(f),
                orderText(toRaw(f)),
                f.detail().isEmpty() ? "" : detailText(f)));
      }
      for (Entry e : Catalog.ENTRIES) {
        if (e.group().equals(group) && run.skipped.containsKey(e.id())) {
          rows.add(
              List.of(
                  e.label(),
                  "skipped",
                  guarantee(e),
                  "",
                  "",
                  run.skipped.get(e.id()),
                  "",
                  "",
                  "",
                  ""));
        }
      }
      html.append(
          table(
              List.of(
                  "variant",
                  "role",
                  "guarantee; round trips per unit",
                  "threads",
                  "keys",
                  "ok/s [95 % interval]",
                  "attempts/s",
                  "ratio to raw",
                  "order effect",
                  "detail"),
              rows));
    }
    html.append("<h2>Convoy: latency over time through a ")
        .append(run.profile.stall().toMillis())
        .append(" ms stall</h2>\n<p>")
        .append(Svg.escape(convoyIntro()))
        .append("</p>\n");
    if (!run.convoy.isEmpty()) {
      // The stall began when the stalled participant got to it (on a contended lock, when it
      // finally acquired), so each design has its own window; the chart shades the first one's.
      double stallFrom = run.convoy.get(0).stallFromSecond();
      double stallTo = run.convoy.get(0).stallToSecond();
      List<Svg.Line> completed =
          run.convoy.stream()
              .map(
                  r ->
                      new Svg.Line(
                          r.design(),
                          r.slices().stream()
                              .map(slice -> new double[] {slice[0] / 1000.0, slice[3] * 10.0})
                              .toList()))
              .toList();
      html.append(
          Svg.lines(
              "Units completed per second by the other workers, per 100 ms",
              "seconds since the start (shaded: the stall)",
              "units/s",
              completed,
              stallFrom,
              stallTo,
              false));
      List<Svg.Line> oldest =
          run.convoy.stream()
              .map(
                  r ->
                      new Svg.Line(
                          r.design(),
                          r.slices().stream()
                              .filter(slice -> slice[2] > 0)
                              .map(slice -> new double[] {slice[0] / 1000.0, slice[1] / 1e6})
                              .toList()))
              .toList();
      html.append(
          Svg.lines(
              "Age of the oldest unit in flight, per 100 ms (log scale): waits and starvation",
              "seconds since the start (shaded: the stall)",
              "ms",
              oldest,
              stallFrom,
              stallTo,
              true));
    }
    html.append(table(CONVOY_COLUMNS, convoyRows()));
    html.append(
        "<p>Every measured turn: <a href='turns.csv'>turns.csv</a>; the same tables"
            + " in <a href='summary.md'>summary.md</a>.</p></body></html>\n");
    return html.toString();
  }

  private static final List<String> CONVOY_COLUMNS =
      List.of(
          "design",
          "phase",
          "units",
          "units/s",
          "attempts per unit",
          "gave up",
          "p50 ms",
          "p99 ms",
          "p99.9 ms",
          "max ms");

  /** The convoy table's rows, the same in the Markdown and the HTML report. */
  private List<List<String>> convoyRows() {
    List<List<String>> rows = new ArrayList<>();
    for (ConvoyHarness.Result r : run.convoy) {
      for (ConvoyHarness.Phase phase : ConvoyHarness.Phase.values()) {
        Histogram h = r.histogram(phase);
        rows.add(
            List.of(
                r.design(),
                switch (phase) {
                  case BEFORE -> "before";
                  case DURING -> "during the stall";
                  case AFTER -> "after";
                },
                Long.toString(h.getTotalCount()),
                Svg.compact(r.perSecond(phase)),
                String.format(Locale.ROOT, "%.2f", r.attemptsPerUnit(phase)),
                Long.toString(r.giveUps().of(phase)),
                String.format(Locale.ROOT, "%.2f", ms(h.getValueAtPercentile(50))),
                String.format(Locale.ROOT, "%.2f", ms(h.getValueAtPercentile(99))),
                String.format(Locale.ROOT, "%.2f", ms(h.getValueAtPercentile(99.9))),
                String.format(Locale.ROOT, "%.2f", ms(h.getMaxValue()))));
      }
    }
    run.convoySkipped.forEach(
        (design, why) -> {
          List<String> row = new ArrayList<>(List.of(design, "skipped: " + why));
          while (row.size() < CONVOY_COLUMNS.size()) {
            row.add("");
          }
          rows.add(row);
        });
    return rows;
  }

  private String chart(String group, List<Figure> groupFigures) {
    List<String> categories =
        groupFigures.stream()
            .map(f -> f.threads() + "t, " + keysLabel(f.entry(), f.keys()))
            .distinct()
            .toList();
    List<Entry> variants = groupFigures.stream().map(Figure::entry).distinct().toList();
    List<Svg.Series> series = new ArrayList<>();
    for (Entry variant : variants) {
      double[] values = new double[categories.size()];
      for (int c = 0; c < categories.size(); c++) {
        String category = categories.get(c);
        values[c] =
            groupFigures.stream()
                .filter(
                    f ->
                        f.entry().equals(variant)
                            && category.equals(
                                f.threads() + "t, " + keysLabel(f.entry(), f.keys())))
                .mapToDouble(Figure::okPerSecond)
                .findFirst()
                .orElse(Double.NaN);
      }
      series.add(new Svg.Series(variant.label(), values));
    }
    return Svg.bars(group, "ok/s", categories, series);
  }

  private static String table(List<String> head, List<List<String>> rows) {
    StringBuilder html = new StringBuilder("<table><tr>");
    head.forEach(h -> html.append("<th>").append(Svg.escape(h)).append("</th>"));
    html.append("</tr>\n");
    for (List<String> row : rows) {
      html.append("<tr>");
      row.forEach(cell -> html.append("<td>").append(Svg.escape(cell)).append("</td>"));
      html.append("</tr>\n");
    }
    return html.append("</table>\n").toString();
  }

  private static String inline(String text) {
    return Svg.escape(text).replaceAll("`([^`]+)`", "<code>$1</code>");
  }

  /** How many times its own p99 a CAS writer's longest wait before the stall may be. */
  static final int CAS_WORST_CASE_FACTOR = 10;

  /**
   * Before the stall, on the hot row: each CAS writer's longest wait within {@value
   * #CAS_WORST_CASE_FACTOR}× its own p99, with no unit given up. Exponential backoff keeps the
   * losers of a race out longer and longer while the winners write on, so one writer can lose for
   * seconds; giving up bounds the wait only by failing the write.
   */
  static List<Goal> casWorstCaseGoals(List<ConvoyHarness.Result> convoy) {
    return convoy.stream()
        // the default configuration is graded; the lock-free mode is shown beside it
        .filter(
            r ->
                r.lockFree()
                    && r.design().startsWith("CAS")
                    && !r.design().equals(ConvoyHarness.CAS_NEVER_TAKES_TURNS))
        .map(
            r -> {
              Histogram before = r.before();
              boolean bounded =
                  before.getMaxValue()
                      <= before.getValueAtPercentile(99) * (long) CAS_WORST_CASE_FACTOR;
              return new Goal(
                  r.design()
                      + ": bounded worst case on the hot row before the stall (longest wait within "
                      + CAS_WORST_CASE_FACTOR
                      + "× its p99, no unit given up)",
                  bounded && r.giveUps().before() == 0 ? "met" : "not met",
                  String.format(
                      Locale.ROOT,
                      "p99 / max %.1f / %.1f ms, %d of %d units gave up",
                      ms(before.getValueAtPercentile(99)),
                      ms(before.getMaxValue()),
                      r.giveUps().before(),
                      before.getTotalCount()));
            })
        .toList();
  }

  /** How many times the blocking advisory lock's longest wait a fenced lock's may be. */
  static final int STARVATION_FACTOR = 5;

  /**
   * Before the stall, on the hot key: each fenced lock's longest wait within {@value
   * #STARVATION_FACTOR}× the blocking advisory lock's, whose waiters PostgreSQL serves in turn. A
   * polling lock lets one waiter lose the race again and again (seconds); a lock whose waiters
   * queue does not.
   */
  static List<Goal> starvationGoals(List<ConvoyHarness.Result> convoy) {
    ConvoyHarness.Result advisory =
        convoy.stream()
            .filter(r -> r.design().startsWith("Advisory lock, blocking"))
            .findFirst()
            .orElse(null);
    if (advisory == null) {
      return List.of();
    }
    long bound = advisory.before().getMaxValue() * STARVATION_FACTOR;
    return convoy.stream()
        .filter(r -> !r.lockFree() && r.design().startsWith("Fenced lock"))
        .map(
            r ->
                new Goal(
                    r.design()
                        + ": no waiter starved on the hot key before the stall (longest wait"
                        + " within "
                        + STARVATION_FACTOR
                        + "× the blocking advisory lock's)",
                    r.before().getMaxValue() <= bound ? "met" : "not met",
                    String.format(
                        Locale.ROOT,
                        "p99.9 / max %.1f / %.1f ms vs %.1f / %.1f ms",
                        ms(r.before().getValueAtPercentile(99.9)),
                        ms(r.before().getMaxValue()),
                        ms(advisory.before().getValueAtPercentile(99.9)),
                        ms(advisory.before().getMaxValue()))))
        .toList();
  }
}
