package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * What a child JVM's command line shows: every local user reads it in {@code ps}, so the endpoints
 * a test hands a child (a Redis URI or a PgBouncer URL with the password the services script
 * generated) must not be on it, as {@code -D} or as an argument. The child still gets them, as
 * system properties and as {@code main}'s arguments. Before, both were on the command line.
 */
class ChildJvmCommandLineTest {

  private static final String REDIS_URI = "redis://:s3cret-redis@127.0.0.1:6379";
  private static final String PGBOUNCER_URL =
      "jdbc:postgresql://127.0.0.1:6432/test?user=postgres&password=s3cret-bouncer";

  @org.junit.jupiter.api.Test
  void credentialsReachTheChildButNotItsCommandLine() throws Exception {
    try (ChildJvm child =
        ChildJvm.start(
            "echo",
            Map.of("nolock.test.redisUri", REDIS_URI),
            EchoMain.class,
            PGBOUNCER_URL,
            "",
            "two words")) {
      String[] ready = child.awaitLine("READY", Duration.ofSeconds(60));
      assertThat(ready).containsExactly("READY");
      // What ps shows: the kernel's copy of argv (ProcessHandle.Info gives none for a command
      // line this long).
      List<String> commandLine =
          List.of(
              Files.readString(Path.of("/proc", Long.toString(child.pid()), "cmdline"))
                  .split("\0"));
      assertThat(commandLine).as("the child's command line").contains(EchoMain.class.getName());
      assertThat(commandLine)
          .as("arguments of the child's command line that carry a password")
          .filteredOn(argument -> argument.contains("s3cret"))
          .isEmpty();
      child.send("ECHO");
      child.awaitLine("PROPERTY", Duration.ofSeconds(60));
      child.awaitExit(Duration.ofSeconds(60));
      assertThat(child.lines())
          .contains(
              "PROPERTY " + REDIS_URI, "ARGS 3", "ARG " + PGBOUNCER_URL, "ARG ", "ARG two words");
    }
  }

  /** Prints READY, then on ECHO its property and arguments, and exits. */
  public static final class EchoMain {
    public static void main(String[] args) throws Exception {
      System.out.println("READY");
      System.out.flush();
      java.io.BufferedReader in =
          new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
      if ("ECHO".equals(in.readLine())) {
        System.out.println("ARGS " + args.length);
        for (String arg : args) {
          System.out.println("ARG " + arg);
        }
        System.out.println("PROPERTY " + System.getProperty("nolock.test.redisUri"));
        System.out.flush();
      }
    }
  }
}
