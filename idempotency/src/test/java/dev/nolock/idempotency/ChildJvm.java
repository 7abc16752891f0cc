package dev.nolock.idempotency;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.awaitility.Awaitility;

/**
 * A child JVM running a test main, the way testkit's {@code PauseScenario} runs its paused holders:
 * {@code java} from {@code java.home}, this JVM's class path, a small heap; one line per event on
 * its stdout; a stdin gate that pins where a signal lands; {@code kill -STOP/-CONT/-9}, and the
 * kernel's view of the process from {@code /proc}. Linux only. Close it to kill what is left.
 */
final class ChildJvm implements AutoCloseable {

  private final Process process;
  private final BlockingQueue<String> lines = new LinkedBlockingQueue<>();
  private final List<String> seen = new ArrayList<>();

  private ChildJvm(Process process) {
    this.process = process;
    Thread reader =
        new Thread(
            () -> {
              try (BufferedReader out =
                  new BufferedReader(
                      new InputStreamReader(process.getInputStream(), StandardCharsets.UTF_8))) {
                for (String line; (line = out.readLine()) != null; ) {
                  lines.add(line);
                }
              } catch (IOException e) {
                lines.add("ERROR reading the child's output: " + e);
              }
            },
            "child-jvm-" + process.pid());
    reader.setDaemon(true);
    reader.start();
  }

  static ChildJvm start(Class<?> main, String... args) throws IOException {
    List<String> command = new ArrayList<>();
    command.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
    command.add("-Xmx128m");
    command.add("-XX:+UseSerialGC");
    command.add("-XX:TieredStopAtLevel=1");
    command.add("-Dorg.jooq.no-logo=true");
    command.add("-Dorg.jooq.no-tips=true");
    command.add("-cp");
    command.add(System.getProperty("java.class.path"));
    command.add(main.getName());
    command.addAll(List.of(args));
    ProcessBuilder builder = new ProcessBuilder(command);
    builder.redirectError(ProcessBuilder.Redirect.INHERIT);
    return new ChildJvm(builder.start());
  }

  long pid() {
    return process.pid();
  }

  /** Waits for the next line, which must start with {@code prefix}; returns its words. */
  String[] expect(String prefix, Duration timeout) throws InterruptedException {
    String line = lines.poll(timeout.toMillis(), TimeUnit.MILLISECONDS);
    if (line == null) {
      throw new AssertionError(
          "The child (pid "
              + pid()
              + ") printed nothing within "
              + timeout
              + " while "
              + prefix
              + " was expected; it printed before: "
              + seen);
    }
    seen.add(line);
    if (!line.startsWith(prefix)) {
      throw new AssertionError(
          "The child (pid "
              + pid()
              + ") printed \""
              + line
              + "\" where "
              + prefix
              + " was expected; before: "
              + seen);
    }
    return line.split(" ");
  }

  /** Writes one line to the child's stdin (its gate). */
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
    Awaitility.await("pid " + pid() + " in state " + state)
        .atMost(Duration.ofSeconds(10))
        .pollInterval(Duration.ofMillis(5))
        .until(
            () -> {
              String content = Files.readString(stat);
              return content.charAt(content.lastIndexOf(')') + 2) == state;
            });
  }

  /** Waits for the process to end (after {@code kill -9}, until the kernel has reaped it). */
  int awaitExit(Duration timeout) throws InterruptedException {
    if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
      throw new AssertionError("The child (pid " + pid() + ") did not exit within " + timeout);
    }
    return process.exitValue();
  }

  /** True while {@code /proc/<pid>} exists. */
  boolean visibleInProc() {
    try {
      Files.readString(Path.of("/proc", Long.toString(pid()), "stat"));
      return true;
    } catch (NoSuchFileException e) {
      return false;
    } catch (IOException e) {
      throw new IllegalStateException(e);
    }
  }

  @Override
  public void close() {
    if (process.isAlive()) {
      process.destroyForcibly();
    }
  }
}
