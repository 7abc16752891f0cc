package dev.nolock.ownership;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;
import org.awaitility.Awaitility;

/**
 * A child JVM running a test main, the way testkit's {@code PauseScenario} runs its paused holders:
 * {@code java} from {@code java.home}, this JVM's class path, a small heap; one line per event on
 * its stdout; a stdin gate that pins where a signal lands; {@code kill -STOP/-CONT/-9}; the
 * kernel's view of the process from {@code /proc}. Linux only. Close it to kill what is left.
 */
final class ChildJvm implements AutoCloseable {

  private final String name;
  private final Process process;
  private final List<String> lines = new ArrayList<>();
  private int consumed;

  private ChildJvm(String name, Process process) {
    this.name = name;
    this.process = process;
    Thread reader =
        new Thread(
            () -> {
              try (BufferedReader out =
                  new BufferedReader(
                      new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = out.readLine()) != null; ) {
                  synchronized (lines) {
                    lines.add(line);
                    lines.notifyAll();
                  }
                }
              } catch (IOException e) {
                synchronized (lines) {
                  lines.add("ERROR reading the child's output: " + e);
                  lines.notifyAll();
                }
              }
            },
            "child-" + name);
    reader.setDaemon(true);
    reader.start();
  }

  static ChildJvm start(String name, Class<?> main, String... args) throws IOException {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add("-Xmx128m");
    command.add("-XX:+UseSerialGC");
    command.add("-XX:TieredStopAtLevel=1");
    command.add("-Dorg.jooq.no-logo=true");
    command.add("-Dorg.jooq.no-tips=true");
    command.add("-Dorg.slf4j.simpleLogger.logFile=System.err");
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add(main.getName());
    command.addAll(List.of(args));
    ProcessBuilder builder = new ProcessBuilder(command);
    builder.redirectError(ProcessBuilder.Redirect.INHERIT);
    return new ChildJvm(name, builder.start());
  }

  String name() {
    return name;
  }

  long pid() {
    return process.pid();
  }

  /**
   * Waits for the next line, from where the last wait stopped, that starts with {@code prefix};
   * lines in between stay in {@link #lines()}. A line starting with {@code FAILED} or {@code ERROR}
   * fails the wait.
   */
  String[] awaitLine(String prefix, Duration timeout) throws InterruptedException {
    return awaitLine(line -> line.startsWith(prefix), prefix, timeout);
  }

  String[] awaitLine(Predicate<String> match, String what, Duration timeout)
      throws InterruptedException {
    long deadline = System.nanoTime() + timeout.toNanos();
    synchronized (lines) {
      while (true) {
        while (consumed < lines.size()) {
          String line = lines.get(consumed++);
          if (line.startsWith("FAILED") || line.startsWith("ERROR")) {
            throw new AssertionError(name + " (pid " + pid() + ") printed: " + line);
          }
          if (match.test(line)) {
            return line.split(" ");
          }
        }
        long left = deadline - System.nanoTime();
        if (left <= 0) {
          throw new AssertionError(
              name
                  + " (pid "
                  + pid()
                  + ") printed no "
                  + what
                  + " line within "
                  + timeout
                  + "; its last lines: "
                  + lines.subList(Math.max(0, lines.size() - 10), lines.size()));
        }
        TimeUnit.NANOSECONDS.timedWait(lines, left);
      }
    }
  }

  /** Every line printed so far. */
  List<String> lines() {
    synchronized (lines) {
      return List.copyOf(lines);
    }
  }

  /** Writes one line to the child's stdin. */
  void send(String line) throws IOException {
    OutputStream in = process.getOutputStream();
    in.write((line + "\n").getBytes(StandardCharsets.UTF_8));
    in.flush();
  }

  void signal(String signal) throws IOException, InterruptedException {
    Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(pid())).start();
    if (kill.waitFor() != 0) {
      throw new IllegalStateException("kill -" + signal + " " + pid() + " failed");
    }
  }

  /** Waits until the kernel reports the process in {@code state} ('T' = stopped by a signal). */
  void awaitState(char state) {
    Path stat = Path.of("/proc", Long.toString(pid()), "stat");
    // Field 3, after the parenthesised command name, is the state.
    Awaitility.await(name + " (pid " + pid() + ") in state " + state)
        .atMost(Duration.ofSeconds(10))
        .pollInterval(Duration.ofMillis(5))
        .until(
            () -> {
              String content = Files.readString(stat);
              return content.charAt(content.lastIndexOf(')') + 2) == state;
            });
  }

  /** Waits for the process to end and returns its exit code (137 after {@code kill -9}). */
  int awaitExit(Duration timeout) throws InterruptedException {
    if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
      throw new AssertionError(name + " (pid " + pid() + ") did not exit within " + timeout);
    }
    return process.exitValue();
  }

  boolean isAlive() {
    return process.isAlive();
  }

  @Override
  public void close() {
    if (process.isAlive()) {
      process.destroyForcibly();
    }
  }
}
