package dev.nolock.benchmarks;

import dev.nolock.benchmarks.Catalog.Entry;
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

/**
 * The main command: runs every design, its raw floor and its peers in one run, then the harnesses
 * and the convoy scenario, and writes the report.
 *
 * <ol>
 *   <li>Find the servers ({@link Servers}: embedded PostgreSQL and Redis when none answers).
 *   <li>For each benchmark class, a paired run ({@link Paired}) of its designs, floors and peers at
 *       every thread and key count of the profile.
 *   <li>The queue drain and partitioned-ownership harnesses, then the convoy scenario.
 *   <li>The report: {@code report.html}, {@code summary.md}, {@code turns.csv} (every turn).
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
      if (servers.available("postgres")) {
        record.serverSettings.putAll(postgresSettings());
      }
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
    final List<Paired.Turn> turns = new ArrayList<>();
    final Map<String, String> serverSettings = new LinkedHashMap<>();
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
    Path log = out.resolve("workers.log");
    Files.deleteIfExists(log);
    int run = 0;
    for (Map.Entry<Class<?>, List<Entry>> benchmark : byClass.entrySet()) {
      run++;
      List<int[]> cells = new ArrayList<>();
      for (int threads : profile.threads()) {
        for (int keys : hasKeysParameter(benchmark.getKey()) ? profile.keys() : List.of(1)) {
          cells.add(new int[] {threads, keys});
        }
      }
      List<Entry> variants = benchmark.getValue();
      progress.accept(
          String.format(
              "paired run %d/%d: %s, %d cells x %d blocks of %d ms turns: %s",
              run,
              byClass.size(),
              benchmark.getKey().getSimpleName(),
              cells.size(),
              profile.blocks(),
              profile.turn().toMillis(),
              variants.stream().map(Entry::id).collect(Collectors.joining(", "))));
      Map<String, String> failed = new LinkedHashMap<>();
      List<Paired.Turn> turns =
          Paired.run(
              benchmark.getKey(),
              variants,
              cells,
              profile,
              List.of(forkJvmArgs()),
              log,
              failed,
              progress);
      record.turns.addAll(turns);
      failed.forEach((id, why) -> record.skipped.put(id, why + " (its error is in workers.log)"));
      for (Entry entry : variants) {
        for (int[] cell : cells) {
          PairedStats.rate(turns, entry.id(), cell[0], cell[1])
              .ifPresent(
                  ok ->
                      record.figures.add(
                          new Report.Figure(
                              entry,
                              cell[0],
                              cell[1],
                              ok.median(),
                              ok.low(),
                              ok.high(),
                              ok.blocks(),
                              PairedStats.attempts(turns, entry.id(), cell[0], cell[1]),
                              Map.of())));
        }
      }
    }
  }

  /** Single-key benchmarks (the queue) keep their own one-value {@code keys} parameter. */
  private static boolean hasKeysParameter(Class<?> benchmark) throws NoSuchFieldException {
    org.openjdk.jmh.annotations.Param param =
        benchmark.getField("keys").getAnnotation(org.openjdk.jmh.annotations.Param.class);
    return param != null && param.value().length > 1;
  }

  /** The options of every worker JVM, as the report shows them (no endpoint). */
  static List<String> workerJvmArgs() {
    return List.of(
        "-Xms512m", "-Xmx1g", "-XX:+UseG1GC", "-Dorg.jooq.no-logo=true", "-Dorg.jooq.no-tips=true");
  }

  private static String[] forkJvmArgs() {
    List<String> args = new ArrayList<>(workerJvmArgs());
    args.addAll(Servers.forkProperties());
    return args.toArray(String[]::new);
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
                    result.perSecond(),
                    result.perSecond(),
                    1,
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

  /** The settings that change the ranking: durable commits, and dead rows left or vacuumed. */
  private static Map<String, String> postgresSettings() {
    Map<String, String> settings = new LinkedHashMap<>();
    try (java.sql.Connection connection = java.sql.DriverManager.getConnection(Bench.pgUrl());
        java.sql.Statement statement = connection.createStatement()) {
      for (String name :
          List.of(
              "synchronous_commit", "fsync", "autovacuum", "shared_buffers", "max_connections")) {
        try (java.sql.ResultSet row = statement.executeQuery("SHOW " + name)) {
          row.next();
          settings.put(name, row.getString(1));
        }
      }
    } catch (java.sql.SQLException e) {
      settings.put("settings", "not read: " + e.getMessage());
    }
    return settings;
  }

  private static long heapAfterGc() {
    System.gc();
    return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
  }

  private static String formatElapsed(Duration elapsed) {
    return String.format("%d:%02d", elapsed.toMinutes(), elapsed.toSecondsPart());
  }
}
