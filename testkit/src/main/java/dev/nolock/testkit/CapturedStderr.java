package dev.nolock.testkit;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

/**
 * Copies what is written to {@code System.err} while open, and passes it on: slf4j-simple, the
 * binding nolock's tests log through, writes every line there (it looks {@code System.err} up at
 * each write unless {@code org.slf4j.simpleLogger.cacheOutputStream} is set), so a test reads what
 * nolock logged, from every thread, without a logging backend of its own. Open it around the calls
 * whose log lines the test asserts on ({@code try (CapturedStderr log = new CapturedStderr())});
 * {@link #close()} puts the previous stream back. Not for tests that run in parallel in one JVM:
 * their lines land in the same copy.
 */
public final class CapturedStderr implements AutoCloseable {

  private final PrintStream original = System.err;
  private final ByteArrayOutputStream copy = new ByteArrayOutputStream();

  /** Starts copying {@code System.err}. */
  public CapturedStderr() {
    OutputStream both =
        new OutputStream() {
          @Override
          public void write(int b) {
            original.write(b);
            synchronized (copy) {
              copy.write(b);
            }
          }

          @Override
          public void write(byte[] b, int off, int len) {
            original.write(b, off, len);
            synchronized (copy) {
              copy.write(b, off, len);
            }
          }
        };
    System.setErr(new PrintStream(both, true, StandardCharsets.UTF_8));
  }

  /** Everything written since this was opened (up to {@link #close()}). */
  public String text() {
    synchronized (copy) {
      return copy.toString(StandardCharsets.UTF_8);
    }
  }

  /** {@link #text()}, line by line. */
  public List<String> lines() {
    return List.of(text().split("\\R"));
  }

  /** Puts the stream that was there before back; what was copied stays readable. */
  @Override
  public void close() {
    System.err.flush();
    System.setErr(original);
  }
}
