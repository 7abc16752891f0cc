package dev.nolock.testkit.internal;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.function.IntPredicate;
import org.awaitility.Awaitility;

/**
 * {@code kill -<signal>} for a process the tests started, and the wait until the kernel shows its
 * new state: a {@code SIGSTOP} is delivered asynchronously, so a test that freezes a server must
 * not go on before the server is really stopped. By hand because {@link ProcessHandle} sends only
 * {@code SIGTERM} and {@code SIGKILL}.
 */
public final class ProcessSignals {

  private ProcessSignals() {}

  /** Sends {@code kill -<signal>}, e.g. {@code STOP}, {@code CONT}, {@code 9}. */
  public static void send(long pid, String signal) throws IOException, InterruptedException {
    Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(pid)).start();
    if (kill.waitFor() != 0) {
      throw new IllegalStateException("kill -" + signal + " " + pid + " failed");
    }
  }

  /** Waits until the kernel reports the process in {@code state} ('T' = stopped by a signal). */
  public static void awaitState(long pid, char state, String what) {
    awaitStateMatching(pid, s -> s == state, what + " (pid " + pid + ") in state " + state);
  }

  /**
   * Stops ({@code STOP}) or resumes ({@code CONT}) the process and waits until the kernel shows it
   * stopped or not; unchecked, for servers a test freezes and thaws.
   */
  public static void stopOrResume(long pid, boolean stop, String what) {
    try {
      send(pid, stop ? "STOP" : "CONT");
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while signalling " + what, e);
    }
    awaitStateMatching(pid, s -> (s == 'T') == stop, what + (stop ? " stopped" : " resumed"));
  }

  private static void awaitStateMatching(long pid, IntPredicate stateMatches, String alias) {
    Path stat = Path.of("/proc", Long.toString(pid), "stat");
    // Field 3, after the parenthesised command name, is the state.
    Awaitility.await(alias)
        .atMost(Duration.ofSeconds(10))
        .pollInterval(Duration.ofMillis(5))
        .until(
            () -> {
              String content = Files.readString(stat);
              return stateMatches.test(content.charAt(content.lastIndexOf(')') + 2));
            });
  }
}
