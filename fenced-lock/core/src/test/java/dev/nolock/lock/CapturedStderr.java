package dev.nolock.lock;

import java.io.ByteArrayOutputStream;
import java.io.OutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;

/** Copies what is written to {@code System.err} (where slf4j-simple logs) while open. */
final class CapturedStderr implements AutoCloseable {
  private final PrintStream original = System.err;
  private final ByteArrayOutputStream copy = new ByteArrayOutputStream();

  CapturedStderr() {
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

  List<String> lines() {
    synchronized (copy) {
      return List.of(copy.toString(StandardCharsets.UTF_8).split("\\R"));
    }
  }

  @Override
  public void close() {
    System.setErr(original);
  }
}
