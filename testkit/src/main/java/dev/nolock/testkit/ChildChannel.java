package dev.nolock.testkit;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.IOException;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.BlockingQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.LinkedBlockingQueue;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;

/**
 * The child side of the line protocol between a test and a {@link ChildJvm}: the {@code main} of a
 * process that a kill or pause test freezes with {@code SIGSTOP} or kills with {@code SIGKILL}
 * opens one channel, reports its events on it and waits on it for the test's commands.
 *
 * <p>The protocol:
 *
 * <ol>
 *   <li>Child to test, on stdout: one line per event, words separated by one space, the first word
 *       naming the event ({@code READY}, {@code GATE 3 17 2}, ...). A line starting with {@code
 *       ERROR} or {@code FAILED} fails the test's next {@link ChildJvm#awaitLine wait}.
 *   <li>Test to child, on stdin, one command per line:
 *       <ul>
 *         <li>{@code ARM} ({@link ChildJvm#arm}): the next {@link #takeArm} answers true, once;
 *             answered {@code ARMED} on stdout. For a child that must reach its gate only at a
 *             moment the test chooses.
 *         <li>{@code GO} ({@link ChildJvm#go}): opens the {@link #gate}. The gate only pins where
 *             the test's {@code SIGSTOP} lands (the child reports, then blocks in {@link #gate});
 *             the pause itself is the signal. Once open it stays open.
 *         <li>{@code STOP} ({@link ChildJvm#stop}): {@link #awaitStop} returns; the child shuts
 *             down gracefully, prints its last report and exits 0.
 *         <li>The end of stdin (the test's JVM is gone) counts as {@code STOP} and opens the gate,
 *             so a child never outlives its test waiting for a command.
 *         <li>Anything else is a line the child reads with {@link #nextLine} (a command with
 *             arguments of its own); a child that reads none reports {@code ERROR unknown command
 *             <line>}.
 *       </ul>
 * </ol>
 *
 * <p>Written by hand: no library speaks a line protocol over a child JVM's stdin and stdout; this
 * is a reader thread and three latches.
 */
public final class ChildChannel {

  private final PrintStream out =
      new PrintStream(new FileOutputStream(FileDescriptor.out), true, StandardCharsets.UTF_8);
  private final CountDownLatch go = new CountDownLatch(1);
  private final CountDownLatch stop = new CountDownLatch(1);
  private final BlockingQueue<String> other = new LinkedBlockingQueue<>();
  private final boolean readsOtherLines;
  private boolean armed; // guarded by out: ARM and its ARMED line are one step for a reporter

  private ChildChannel(boolean readsOtherLines) {
    this.readsOtherLines = readsOtherLines;
    Thread reader = new Thread(this::readCommands, "child-channel-stdin");
    reader.setDaemon(true);
    reader.start();
  }

  /** Opens the channel: starts reading commands; any command besides the protocol's is an error. */
  public static ChildChannel open() {
    return new ChildChannel(false);
  }

  /** Opens the channel for a child that reads commands of its own with {@link #nextLine}. */
  public static ChildChannel openWithOwnCommands() {
    return new ChildChannel(true);
  }

  /** Prints one event line: {@code words} separated by one space. */
  public void report(Object... words) {
    String line = Arrays.stream(words).map(String::valueOf).collect(Collectors.joining(" "));
    synchronized (out) {
      out.println(line);
    }
  }

  /**
   * Reports {@code ERROR <failure>}, prints its stack trace on stderr and exits with {@code
   * status}: for the {@code catch} around a child's {@code main}.
   */
  public void fail(Throwable failure, int status) {
    report("ERROR", failure);
    failure.printStackTrace();
    System.exit(status);
  }

  /** True once after each {@code ARM}: whether the gate this call guards is to be taken now. */
  public boolean takeArm() {
    synchronized (out) {
      boolean was = armed;
      armed = false;
      return was;
    }
  }

  /** Blocks until {@code GO} (or the end of stdin). */
  public void gate() throws InterruptedException {
    go.await();
  }

  /** Blocks until {@code STOP} (or the end of stdin). */
  public void awaitStop() throws InterruptedException {
    stop.await();
  }

  /** Waits up to {@code timeout} for {@code STOP} (or the end of stdin); true if it came. */
  public boolean awaitStop(Duration timeout) throws InterruptedException {
    return stop.await(timeout.toNanos(), TimeUnit.NANOSECONDS);
  }

  /**
   * The next line on stdin that is not one of the protocol's commands, or null after {@code STOP}
   * or the end of stdin. Only for a channel opened with {@link #openWithOwnCommands}.
   */
  public String nextLine() throws InterruptedException {
    if (!readsOtherLines) {
      throw new IllegalStateException(
          "nextLine() needs ChildChannel.openWithOwnCommands(); open() rejects other lines");
    }
    while (true) {
      String line = other.poll(100, TimeUnit.MILLISECONDS);
      if (line != null) {
        return line;
      }
      if (stop.getCount() == 0) {
        return other.poll();
      }
    }
  }

  /**
   * A small connection pool for a child: {@code maxSize} connections, none kept idle, named {@code
   * name} in the child's log. Needs HikariCP on the class path.
   */
  public static HikariDataSource pool(String jdbcUrl, int maxSize, String name) {
    HikariConfig config = new HikariConfig();
    config.setJdbcUrl(jdbcUrl);
    config.setMaximumPoolSize(maxSize);
    config.setMinimumIdle(0);
    config.setPoolName(name);
    return new HikariDataSource(config);
  }

  private void readCommands() {
    try (BufferedReader in =
        new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
      for (String line; (line = in.readLine()) != null; ) {
        switch (line) {
          case "ARM" -> {
            synchronized (out) {
              armed = true;
              out.println("ARMED");
            }
          }
          case "GO" -> go.countDown();
          case "STOP" -> stop.countDown();
          default -> {
            if (readsOtherLines) {
              other.add(line);
            } else {
              report("ERROR unknown command", line);
            }
          }
        }
      }
    } catch (IOException e) {
      report("ERROR reading stdin:", e);
    }
    stop.countDown();
    go.countDown();
  }
}
