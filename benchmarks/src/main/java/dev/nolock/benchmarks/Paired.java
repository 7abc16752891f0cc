package dev.nolock.benchmarks;

import dev.nolock.benchmarks.Catalog.Entry;
import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.function.Consumer;

/**
 * The coordinator of a paired run: the variants of one benchmark class measured in turns, so that
 * every ratio divides two figures taken side by side in time.
 *
 * <ol>
 *   <li>Each variant gets its own JVM ({@link TurnWorker}), started once and kept for every cell of
 *       the class: no variant shares a JIT profile with another, and none starts cold after the
 *       first cell.
 *   <li>Per cell (threads, keys), first an unmeasured turn of each variant ({@link Profile#warmup}
 *       long in the class's first cell, a normal turn after).
 *   <li>Then {@link Profile#blocks} blocks, each a palindrome of turns: {@code A B C C B A} (the
 *       next block {@code C B A A B C}), so that within a block every pair of variants ran once in
 *       each order and at the same mean time: a drift of the machine during the block cancels out
 *       of their ratio. Before each turn the variant's tables are reset to the state its trial
 *       began with; only the turn itself is measured.
 *   <li>Every turn is kept ({@link Turn}); nothing is dropped. {@link PairedStats} makes the
 *       ratios.
 * </ol>
 */
final class Paired implements AutoCloseable {

  /**
   * One measured turn.
   *
   * @param block the block it belongs to (0-based)
   * @param position its place in the block's order (0-based)
   */
  record Turn(
      String id, int threads, int keys, int block, int position, double ok, double attempts) {}

  private final Map<Entry, Worker> workers = new LinkedHashMap<>();
  private final Set<Entry> warmed = new HashSet<>();
  private final Consumer<String> progress;

  private Paired(Consumer<String> progress) {
    this.progress = progress;
  }

  /**
   * Measures {@code variants} (all of one benchmark class) in every cell of {@code cells} ({@code
   * {threads, keys}}, keys 0 for a benchmark without a keys parameter). A variant that fails is
   * left out of every remaining turn and named in {@code failed}, with where and why.
   */
  static List<Turn> run(
      Class<?> benchmark,
      List<Entry> variants,
      List<int[]> cells,
      Profile profile,
      List<String> jvmArgs,
      Path log,
      Map<String, String> failed,
      Consumer<String> progress)
      throws IOException, InterruptedException {
    List<Turn> turns = new ArrayList<>();
    try (Paired paired = new Paired(progress)) {
      for (Entry variant : variants) {
        paired.workers.put(variant, Worker.start(variant, jvmArgs, log));
      }
      for (int[] cell : cells) {
        turns.addAll(paired.cell(benchmark, cell[0], cell[1], profile, failed));
      }
    }
    return turns;
  }

  private List<Turn> cell(
      Class<?> benchmark, int threads, int keys, Profile profile, Map<String, String> failed)
      throws InterruptedException {
    List<Entry> live =
        workers.keySet().stream()
            .filter(v -> !failed.containsKey(v.id()))
            .filter(v -> v.role() != Catalog.Role.PEER || profile.peerThreads().contains(threads))
            .toList();
    String where = threads + " thread(s), " + keys + " keys";
    List<Turn> turns = new ArrayList<>();
    for (Entry variant : live) {
      // The long warm-up in the first cell each variant runs in (a peer's is a later one).
      Duration warmup = warmed.add(variant) ? profile.warmup() : profile.turn();
      turn(benchmark, variant, threads, keys, warmup, failed, where);
    }
    for (int block = 0; block < profile.blocks(); block++) {
      List<Entry> palindrome = order(live, block);
      for (int position = 0; position < palindrome.size(); position++) {
        Entry variant = palindrome.get(position);
        double[] rates = turn(benchmark, variant, threads, keys, profile.turn(), failed, where);
        if (rates != null) {
          turns.add(new Turn(variant.id(), threads, keys, block, position, rates[0], rates[1]));
        }
      }
    }
    return turns;
  }

  /**
   * The turns of block {@code block}: the variants, then the same in reverse ({@code A B C C B A}),
   * starting from the other end in every second block ({@code C B A A B C}), and rotated by one
   * every two blocks ({@code B C A A C B}, {@code A C B B C A}, ...) so that with three or more
   * variants each one in turn runs twice in a row, not only the two at the ends.
   */
  static <T> List<T> order(List<T> variants, int block) {
    List<T> half = new ArrayList<>(variants);
    Collections.rotate(half, -(block / 2));
    if (block % 2 == 1) {
      Collections.reverse(half);
    }
    List<T> palindrome = new ArrayList<>(half);
    Collections.reverse(half);
    palindrome.addAll(half);
    return palindrome;
  }

  /** One turn of {@code variant}: its units and attempts per second, or null if it failed. */
  private double[] turn(
      Class<?> benchmark,
      Entry variant,
      int threads,
      int keys,
      Duration length,
      Map<String, String> failed,
      String where)
      throws InterruptedException {
    if (failed.containsKey(variant.id())) {
      return null;
    }
    Worker worker = workers.get(variant);
    worker.send(
        String.join(
            " ",
            "turn",
            benchmark.getName(),
            variant.id(),
            Integer.toString(threads),
            Integer.toString(keys),
            Long.toString(length.toMillis())));
    String answer = worker.next(length.toMillis() + TimeUnit.MINUTES.toMillis(1));
    if (!answer.startsWith(TurnWorker.TURN)) {
      // A worker that timed out may still be running its turn: it must not load the others'.
      worker.kill();
      failed.put(variant.id(), "failed at " + where + ": " + answer);
      progress.accept(variant.id() + " failed at " + where + ": " + answer);
      return null;
    }
    String[] rates = answer.substring(TurnWorker.TURN.length()).split(" ");
    return new double[] {Double.parseDouble(rates[0]), Double.parseDouble(rates[1])};
  }

  @Override
  public void close() {
    workers.values().forEach(Worker::close);
  }

  /** A variant's JVM and the protocol lines it printed. */
  private static final class Worker {
    private final Process process;
    private final PrintStream in;
    private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();

    private Worker(Process process) {
      this.process = process;
      this.in = new PrintStream(process.getOutputStream(), true, StandardCharsets.UTF_8);
      Thread reader =
          new Thread(
              () -> {
                try (BufferedReader out =
                    new BufferedReader(
                        new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                  for (String line = out.readLine(); line != null; line = out.readLine()) {
                    if (line.startsWith("@@")) {
                      lines.add(line);
                    }
                  }
                } catch (IOException e) {
                  // the process ended: next() says so
                }
                lines.add(TurnWorker.FAILED + "the worker JVM exited (see the worker log)");
              },
              "paired-worker-output");
      reader.setDaemon(true);
      reader.start();
    }

    static Worker start(Entry variant, List<String> jvmArgs, Path log) throws IOException {
      List<String> command = new ArrayList<>();
      command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
      command.addAll(jvmArgs);
      command.add("-D" + TurnWorker.ACTIVE + "=true");
      // JMH's lock file keeps two JMH runs apart; here the coordinator does, one turn at a time.
      command.add("-Djmh.ignoreLock=true");
      command.add("-cp");
      command.add(System.getProperty("java.class.path"));
      command.add(TurnWorker.class.getName());
      Process process =
          new ProcessBuilder(command)
              .redirectError(ProcessBuilder.Redirect.appendTo(log.toFile()))
              .start();
      return new Worker(process);
    }

    void send(String line) {
      in.println(line);
    }

    String next(long timeoutMillis) throws InterruptedException {
      String line = lines.poll(timeoutMillis, TimeUnit.MILLISECONDS);
      return line == null ? TurnWorker.FAILED + "no answer in " + timeoutMillis + " ms" : line;
    }

    void kill() {
      process.destroyForcibly();
    }

    void close() {
      send("quit");
      try {
        if (!process.waitFor(5, TimeUnit.SECONDS)) {
          process.destroyForcibly();
        }
      } catch (InterruptedException e) {
        process.destroyForcibly();
        Thread.currentThread().interrupt();
      }
    }
  }
}
