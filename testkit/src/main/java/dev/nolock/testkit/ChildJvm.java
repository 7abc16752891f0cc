package dev.nolock.testkit;

import dev.nolock.testkit.internal.ChildLauncher;
import dev.nolock.testkit.internal.ProcessSignals;
import io.vavr.control.Option;
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
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.function.Predicate;

/**
 * A child JVM running a test's {@code main}: the process the kill and pause tests freeze with
 * {@code SIGSTOP}, resume with {@code SIGCONT} and kill with {@code SIGKILL}. {@code java} from
 * {@code java.home}, this JVM's class path, a small heap and the C1 compiler only (several of them
 * start at once on two cores); the child prints one line per event on stdout, reads commands from
 * stdin (a gate that pins where a signal lands), and its stderr goes to this JVM's; {@link
 * ChildChannel} documents the protocol and is its child side. The kernel's view of the process
 * comes from {@code /proc}, so it needs Linux. Close it to kill what is left.
 *
 * <p>Written by hand: {@link ProcessBuilder} starts the process, but no well-kept library waits on
 * a child's output lines with a timeout or reads its scheduler state.
 */
public final class ChildJvm implements AutoCloseable {

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
                  add(line);
                }
              } catch (IOException e) {
                add("ERROR reading the child's output: " + e);
              }
            },
            "child-" + name);
    reader.setDaemon(true);
    reader.start();
  }

  /** Starts {@code main} with {@code args}, called {@code name} in messages. */
  public static ChildJvm start(String name, Class<?> main, String... args) throws IOException {
    return start(name, Map.of(), main, args);
  }

  /**
   * Starts {@code main} with each of {@code properties} as a system property, and {@code args}.
   * Neither is on the child's command line, which every local user can read: they reach the child
   * through its environment (see {@link ChildLauncher}), so they may carry passwords.
   */
  public static ChildJvm start(
      String name, Map<String, String> properties, Class<?> main, String... args)
      throws IOException {
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
    command.add(ChildLauncher.class.getName());
    command.add(main.getName());
    ProcessBuilder builder = new ProcessBuilder(command);
    // Properties and arguments carry endpoints with passwords: through the environment, which only
    // this user reads, never the command line, which every user reads in ps.
    ChildLauncher.environment(builder.environment(), properties, List.of(args));
    builder.redirectError(ProcessBuilder.Redirect.INHERIT);
    return new ChildJvm(name, builder.start());
  }

  public String name() {
    return name;
  }

  public long pid() {
    return process.pid();
  }

  /**
   * Waits for the next line, from where the last wait stopped, that starts with {@code prefix};
   * lines in between stay in {@link #lines()}. A line starting with {@code FAILED} or {@code ERROR}
   * fails the wait.
   *
   * @return the line's words
   */
  public String[] awaitLine(String prefix, Duration timeout) throws InterruptedException {
    return awaitLine(line -> line.startsWith(prefix), prefix, timeout);
  }

  /** As {@link #awaitLine(String, Duration)}, for the next line that {@code match}es. */
  public String[] awaitLine(Predicate<String> match, String what, Duration timeout)
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

  /**
   * The words of the first line so far that starts with {@code prefix}, without consuming anything:
   * for waiting on whichever of several children prints it first.
   */
  public Option<String[]> printed(String prefix) {
    synchronized (lines) {
      return Option.ofOptional(lines.stream().filter(l -> l.startsWith(prefix)).findFirst())
          .map(l -> l.split(" "));
    }
  }

  /** Every line printed so far. */
  public List<String> lines() {
    synchronized (lines) {
      return List.copyOf(lines);
    }
  }

  /**
   * Sends {@code ARM} and waits for its {@code ARMED}: the child's next armed gate blocks. Lines
   * printed before {@code ARMED} are consumed, as by any {@link #awaitLine} wait.
   */
  public void arm(Duration timeout) throws IOException, InterruptedException {
    send("ARM");
    awaitLine(line -> line.equals("ARMED"), "ARMED", timeout);
  }

  /** Sends {@code GO}: opens the child's gate (it passes once the child runs again). */
  public void go() throws IOException {
    send("GO");
  }

  /** Sends {@code STOP}: the child shuts down gracefully, prints its last report and exits. */
  public void stop() throws IOException {
    send("STOP");
  }

  /**
   * Writes one line to the child's stdin: a command of the child's own (see {@link ChildChannel}).
   */
  public void send(String line) throws IOException {
    OutputStream in = process.getOutputStream();
    in.write((line + "\n").getBytes(StandardCharsets.UTF_8));
    in.flush();
  }

  /** Sends {@code kill -<signal>}, e.g. {@code STOP}, {@code CONT}, {@code 9}. */
  public void signal(String signal) throws IOException, InterruptedException {
    ProcessSignals.send(pid(), signal);
  }

  /** Waits until the kernel reports the process in {@code state} ('T' = stopped by a signal). */
  public void awaitState(char state) {
    ProcessSignals.awaitState(pid(), state, name);
  }

  /** Waits for the process to end and returns its exit code (137 after {@code kill -9}). */
  public int awaitExit(Duration timeout) throws InterruptedException {
    if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
      throw new AssertionError(name + " (pid " + pid() + ") did not exit within " + timeout);
    }
    return process.exitValue();
  }

  public boolean isAlive() {
    return process.isAlive();
  }

  /** True while {@code /proc/<pid>} exists (a killed child stays there until it is reaped). */
  public boolean visibleInProc() {
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

  private void add(String line) {
    synchronized (lines) {
      lines.add(line);
      lines.notifyAll();
    }
  }
}
