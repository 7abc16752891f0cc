package dev.nolock.benchmarks;

import dev.nolock.benchmarks.Catalog.Entry;
import dev.nolock.benchmarks.Catalog.Role;
import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.openjdk.jmh.results.Result;
import org.openjdk.jmh.results.RunResult;
import org.openjdk.jmh.results.format.ResultFormatType;
import org.openjdk.jmh.runner.Runner;
import org.openjdk.jmh.runner.options.ChainedOptionsBuilder;
import org.openjdk.jmh.runner.options.OptionsBuilder;
import org.openjdk.jmh.runner.options.TimeValue;
import org.openjdk.jmh.runner.options.VerboseMode;

/**
 * The main command: runs every design, its raw floor and its peers in one run, then the harnesses
 * and the convoy scenario, and writes the report.
 *
 * <ol>
 *   <li>Find the servers ({@link Servers}: embedded PostgreSQL and Redis when none answers).
 *   <li>For each benchmark class and thread count, one JMH run of the designs and floors at every
 *       key count of the profile, then one of the peers at the profile's peer key counts.
 *   <li>The queue drain and partitioned-ownership harnesses, then the convoy scenario.
 *   <li>The report: {@code report.html}, {@code summary.md}, {@code jmh-result.json}.
 * </ol>
 *
 * <p>Options: {@code --long} (the long profile), {@code --out DIR} (default {@code
 * benchmarks/report}), {@code --only REGEX} (variants whose id matches, for a quick look).
 */
public final class Main {

  private Main() {}

  public static void main(String[] args) throws Exception {
    System.setProperty("org.jooq.no-logo", "true");
    System.setProperty("org.jooq.no-tips", "true");
    Profile profile = Profile.SHORT;
    Path out = Path.of("benchmarks", "report");
    Pattern only = Pattern.compile(".*");
    for (int i = 0; i < args.length; i++) {
      switch (args[i]) {
        case "--long" -> profile = Profile.LONG;
        case "--out" -> out = Path.of(args[++i]);
        case "--only" -> only = Pattern.compile(args[++i]);
        default -> {
          System.err.println("usage: benchmarks.jar [--long] [--out DIR] [--only REGEX]");
          System.exit(2);
        }
      }
    }
    Files.createDirectories(out);
    Instant started = Instant.now();
    Consumer<String> progress =
        line ->
            System.out.printf(
                "[bench %s] %s%n", formatElapsed(Duration.between(started, Instant.now())), line);
    progress.accept("profile " + profile.name() + ", report in " + out.toAbsolutePath());
    long heapAtStart = heapAfterGc();

    RunRecord record = new RunRecord(profile, started);
    try (Servers servers = Servers.find(progress)) {
      record.servers.putAll(servers.uses());
      runJmh(profile, servers, only, out, record, progress);
      runHarnesses(profile, servers, only, record, progress);
      runConvoy(profile, servers, only, record, progress);
    }
    record.heapAtStart = heapAtStart;
    record.heapAtEnd = heapAfterGc();
    record.finished = Instant.now();
    Report.write(out, record);
    progress.accept("report written: " + out.resolve("report.html").toAbsolutePath());
  }

  /** Everything the report needs from one run. */
  static final class RunRecord {
    final Profile profile;
    final Instant started;
    Instant finished;
    final Map<String, Servers.Use> servers = new LinkedHashMap<>();
    final List<Report.Figure> figures = new ArrayList<>();
    final Map<String, String> skipped = new LinkedHashMap<>();
    final List<ConvoyHarness.Result> convoy = new ArrayList<>();
    final Map<String, String> convoySkipped = new LinkedHashMap<>();
    final List<String> jmhJson = new ArrayList<>();
    long heapAtStart;
    long heapAtEnd;

    RunRecord(Profile profile, Instant started) {
      this.profile = profile;
      this.started = started;
    }
  }

  private static void runJmh(
      Profile profile,
      Servers servers,
      Pattern only,
      Path out,
      RunRecord record,
      Consumer<String> progress)
      throws Exception {
    Map<Class<?>, List<Entry>> byClass = new LinkedHashMap<>();
    for (Entry entry : Catalog.ENTRIES) {
      if (!only.matcher(entry.id()).matches() || entry.isHarness()) {
        continue;
      }
      if (!servers.available(entry.server())) {
        record.skipped.put(entry.id(), servers.uses().get(entry.server()).how());
        continue;
      }
      byClass.computeIfAbsent(entry.source(), c -> new ArrayList<>()).add(entry);
    }
    if (profile.forks() == 0 && !profile.prewarm().isZero() && !byClass.isEmpty()) {
      prewarm(profile, byClass, progress);
    }
    int runs = byClass.size() * profile.threads().size() * 2;
    int run = 0;
    for (Map.Entry<Class<?>, List<Entry>> benchmark : byClass.entrySet()) {
      for (int threads : profile.threads()) {
        for (boolean peers : new boolean[] {false, true}) {
          run++;
          List<Entry> entries =
              benchmark.getValue().stream()
                  .filter(entry -> (entry.role() == Role.PEER) == peers)
                  .toList();
          if (entries.isEmpty()) {
            continue;
          }
          progress.accept(
              String.format(
                  "JMH run %d/%d: %s at %d thread(s): %s",
                  run,
                  runs,
                  benchmark.getKey().getSimpleName(),
                  threads,
                  entries.stream().map(Entry::id).collect(Collectors.joining(", "))));
          Path json = Files.createTempFile(out, "jmh-", ".json");
          ChainedOptionsBuilder options =
              new OptionsBuilder()
                  .include(
                      Pattern.quote(benchmark.getKey().getName())
                          + "\\.("
                          + entries.stream().map(Entry::id).collect(Collectors.joining("|"))
                          + ")$")
                  .forks(profile.forks())
                  .threads(threads)
                  .warmupIterations(profile.warmups())
                  .warmupTime(TimeValue.milliseconds(profile.warmup().toMillis()))
                  .measurementIterations(profile.iterations())
                  .measurementTime(TimeValue.milliseconds(profile.iteration().toMillis()))
                  .jvmArgsAppend(forkJvmArgs())
                  .verbosity(VerboseMode.NORMAL)
                  .resultFormat(ResultFormatType.JSON)
                  .result(json.toString());
          List<Integer> keys = peers ? profile.peerKeys() : profile.keys();
          if (hasKeysParameter(benchmark.getKey())) {
            options.param("keys", keys.stream().map(String::valueOf).toArray(String[]::new));
          }
          List<RunResult> results;
          try {
            results = new ArrayList<>(new Runner(options.build()).run());
            record.jmhJson.add(Files.readString(json));
          } catch (Exception e) {
            entries.forEach(entry -> record.skipped.put(entry.id(), "JMH run failed: " + e));
            continue;
          } finally {
            Files.deleteIfExists(json);
          }
          for (RunResult result : results) {
            record.figures.add(figure(result));
          }
          for (Entry entry : entries) {
            boolean measured =
                record.figures.stream()
                    .anyMatch(f -> f.entry().equals(entry) && f.threads() == threads);
            if (!measured) {
              record.skipped.putIfAbsent(
                  entry.id(),
                  "the benchmark failed at "
                      + threads
                      + " thread(s); its error is in the run's"
                      + " output");
            }
          }
        }
      }
    }
  }

  /**
   * One unmeasured pass over every variant in this JVM, so that code shared between designs (jOOQ,
   * pgjdbc, Lettuce, the AWS SDK) is compiled before the first measurement, whichever design runs
   * first. See {@link Profile} for why.
   */
  private static void prewarm(
      Profile profile, Map<Class<?>, List<Entry>> byClass, Consumer<String> progress)
      throws Exception {
    List<String> ids =
        byClass.values().stream().flatMap(List::stream).map(Entry::id).distinct().toList();
    progress.accept(
        "warm-up pass: "
            + ids.size()
            + " variants, "
            + profile.prewarm().toMillis()
            + " ms each, unmeasured");
    int threads = profile.threads().stream().filter(t -> t <= 4).max(Integer::compare).orElse(1);
    new Runner(
            new OptionsBuilder()
                .include("\\.(" + String.join("|", ids) + ")$")
                .forks(0)
                .threads(threads)
                .warmupIterations(0)
                .measurementIterations(1)
                .measurementTime(TimeValue.milliseconds(profile.prewarm().toMillis()))
                .param("keys", "10000")
                .verbosity(VerboseMode.SILENT)
                .build())
        .run();
  }

  /** Single-key benchmarks (the queue) keep their own one-value {@code keys} parameter. */
  private static boolean hasKeysParameter(Class<?> benchmark) throws NoSuchFieldException {
    org.openjdk.jmh.annotations.Param param =
        benchmark.getField("keys").getAnnotation(org.openjdk.jmh.annotations.Param.class);
    return param != null && param.value().length > 1;
  }

  private static String[] forkJvmArgs() {
    List<String> args =
        new ArrayList<>(
            List.of("-Xms512m", "-Xmx1g", "-Dorg.jooq.no-logo=true", "-Dorg.jooq.no-tips=true"));
    args.addAll(Servers.forkProperties());
    return args.toArray(String[]::new);
  }

  private static Report.Figure figure(RunResult result) {
    String benchmark = result.getParams().getBenchmark();
    String id = benchmark.substring(benchmark.lastIndexOf('.') + 1);
    Entry entry = Catalog.require(id);
    String keysParam = result.getParams().getParam("keys");
    int keys = keysParam == null ? 1 : Integer.parseInt(keysParam);
    Result<?> ok = result.getSecondaryResults().get("ok");
    Result<?> attempts = result.getPrimaryResult();
    return new Report.Figure(
        entry,
        result.getParams().getThreads(),
        keys,
        ok.getScore(),
        Double.isNaN(ok.getScoreError()) ? 0 : ok.getScoreError(),
        attempts.getScore(),
        Map.of());
  }

  private static void runHarnesses(
      Profile profile, Servers servers, Pattern only, RunRecord record, Consumer<String> progress) {
    Map<Class<?>, List<Entry>> byHarness = new LinkedHashMap<>();
    for (Entry entry : Catalog.ENTRIES) {
      if (entry.isHarness() && only.matcher(entry.id()).matches()) {
        byHarness.computeIfAbsent(entry.source(), c -> new ArrayList<>()).add(entry);
      }
    }
    for (Map.Entry<Class<?>, List<Entry>> variants : byHarness.entrySet()) {
      List<Entry> entries = variants.getValue();
      String name = variants.getKey().getSimpleName();
      String server = entries.get(0).server();
      if (!servers.available(server)) {
        entries.forEach(e -> record.skipped.put(e.id(), servers.uses().get(server).how()));
        continue;
      }
      try {
        Harness harness = (Harness) variants.getKey().getDeclaredConstructor().newInstance();
        progress.accept("harness: " + harness.title());
        for (HarnessResult result : harness.run(profile, progress)) {
          Entry entry = Catalog.require(result.id());
          if (only.matcher(entry.id()).matches()) {
            record.figures.add(
                new Report.Figure(
                    entry,
                    result.threads(),
                    0,
                    result.perSecond(),
                    0,
                    result.perSecond(),
                    result.detail()));
          }
        }
      } catch (Exception e) {
        progress.accept(name + " failed: " + e);
        entries.forEach(entry -> record.skipped.putIfAbsent(entry.id(), name + " failed: " + e));
      }
    }
  }

  private static void runConvoy(
      Profile profile, Servers servers, Pattern only, RunRecord record, Consumer<String> progress) {
    for (ConvoyHarness.Design design : ConvoyHarness.designs()) {
      if (!only.matcher("convoy").matches()) {
        return;
      }
      if (!servers.available(design.server())) {
        record.convoySkipped.put(design.name(), servers.uses().get(design.server()).how());
        continue;
      }
      progress.accept("convoy: " + design.name());
      try {
        record.convoy.add(ConvoyHarness.run(design, profile, progress));
      } catch (Exception e) {
        progress.accept("convoy " + design.name() + " failed: " + e);
        record.convoySkipped.put(design.name(), "failed: " + e);
      }
    }
  }

  private static long heapAfterGc() {
    System.gc();
    return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
  }

  private static String formatElapsed(Duration elapsed) {
    return String.format("%d:%02d", elapsed.toMinutes(), elapsed.toSecondsPart());
  }
}
