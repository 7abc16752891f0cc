package dev.nolock.testkit;

import dev.nolock.testkit.internal.ProcessSignals;
import dev.nolock.testkit.internal.UniqueNames;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.common.Uuid;
import org.awaitility.Awaitility;

/**
 * A single-node Kafka (KRaft broker and controller in one process) of its own on loopback, for
 * tests that must freeze or kill the broker without touching the shared one of {@link
 * KafkaExtension}. Made by {@link PrivateKafkaBrokerExtension}.
 *
 * <p>Guarantees, in order:
 *
 * <ol>
 *   <li>{@link #start(Path)} runs the Kafka installation that {@code scripts/services up kafka}
 *       resolved (the classpath in the file named by {@value #CLASSPATH_FILE_VARIABLE}, else in
 *       {@code .services/kafka/classpath.txt} of the first directory upwards from the working
 *       directory that has one): it formats a fresh data directory under the given directory with a
 *       random cluster id, then launches {@code kafka.Kafka} with a 256 MB heap on two free
 *       loopback ports, writing its log to {@code kafka.log} there. Every internal topic has one
 *       replica ({@code offsets.topic.replication.factor}, {@code
 *       transaction.state.log.replication.factor}, {@code transaction.state.log.min.isr} are 1), so
 *       transactions and groups work on one node. It returns once the broker has registered and
 *       answers metadata requests.
 *   <li>{@link #freeze()} and {@link #thaw()} send {@code SIGSTOP} and {@code SIGCONT} and return
 *       once the kernel reports the new state: a frozen broker keeps its connections open and
 *       answers nothing, so clients see timeouts, not refused connections.
 *   <li>{@link #close()} kills the process ({@code SIGKILL}, frozen or not) and closes the admin
 *       client; so does a shutdown hook if the JVM ends first. The directory stays for a failed
 *       test's log.
 * </ol>
 *
 * Needs {@code org.apache.kafka:kafka-clients} on the test classpath and a Java 17+ runtime for the
 * broker (the test JVM's own {@code java} is used).
 */
public final class PrivateKafkaBroker implements AutoCloseable {

  /** Names the file with the broker's classpath, as a system property or environment variable. */
  public static final String CLASSPATH_FILE_VARIABLE = "NOLOCK_KAFKA_CLASSPATH_FILE";

  /** How long formatting and starting the broker may take. */
  public static final Duration READY_TIMEOUT = Duration.ofSeconds(60);

  private static final Path CLASSPATH_FILE_IN_CLONE =
      Path.of(".services", "kafka", "classpath.txt");

  private final Process process;
  private final String bootstrapServers;
  private final Path log;
  private final Admin admin;
  private final KafkaBroker broker;
  private volatile boolean frozen;

  private PrivateKafkaBroker(Process process, String bootstrapServers, Path log) {
    this.process = process;
    this.bootstrapServers = bootstrapServers;
    this.log = log;
    this.admin =
        Admin.create(
            Map.<String, Object>of(
                AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG,
                bootstrapServers,
                AdminClientConfig.CLIENT_ID_CONFIG,
                "nolock-testkit-private-" + process.pid(),
                AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG,
                5_000,
                AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG,
                10_000));
    this.broker = new KafkaBroker(bootstrapServers, admin, UniqueNames.hex12());
  }

  /** Formats and starts a broker with its data under {@code directory}, which must not exist. */
  public static PrivateKafkaBroker start(Path directory) throws IOException {
    String classpath = Files.readString(classpathFile()).trim();
    Files.createDirectories(directory.getParent());
    Files.createDirectory(directory);
    int port = freePort();
    int controllerPort = freePort();
    Path properties = directory.resolve("server.properties");
    Files.writeString(
        properties, serverProperties(directory.resolve("data"), port, controllerPort));
    Path log = directory.resolve("kafka.log");
    String java = Path.of(System.getProperty("java.home"), "bin", "java").toString();

    Process format =
        new ProcessBuilder(
                java,
                "-Xmx128m",
                "-XX:TieredStopAtLevel=1",
                "-XX:+UseSerialGC",
                "-cp",
                classpath,
                "kafka.tools.StorageTool",
                "format",
                "--standalone",
                "-t",
                Uuid.randomUuid().toString(),
                "-c",
                properties.toString())
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
            .start();
    awaitExit(format, log);

    Process process =
        new ProcessBuilder(
                java,
                "-Xms128m",
                "-Xmx256m",
                "-XX:+UseSerialGC",
                // Startup, not throughput, is what a test waits for.
                "-XX:TieredStopAtLevel=1",
                "-Djava.awt.headless=true",
                "-Dorg.slf4j.simpleLogger.showDateTime=true",
                "-cp",
                classpath,
                "kafka.Kafka",
                properties.toString())
            .redirectErrorStream(true)
            .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
            .start();
    PrivateKafkaBroker broker = new PrivateKafkaBroker(process, "127.0.0.1:" + port, log);
    // A test JVM that ends without closing the broker (killed fork, System.exit) leaves no broker.
    Runtime.getRuntime().addShutdownHook(new Thread(broker::close, "private-kafka-stop"));
    try {
      broker.awaitReady();
      return broker;
    } catch (RuntimeException e) {
      broker.close();
      throw e;
    }
  }

  /** The {@code bootstrap.servers} value: {@code 127.0.0.1:<port>}. */
  public String bootstrapServers() {
    return bootstrapServers;
  }

  /**
   * This broker as {@link KafkaExtension} gives the shared one: an admin client (closed with this
   * broker), {@code createTopic}, {@code uniqueTopicName}.
   */
  public KafkaBroker broker() {
    return broker;
  }

  /** The operating system's process id of the broker. */
  public long pid() {
    return process.pid();
  }

  /** The broker's log file. */
  public Path log() {
    return log;
  }

  /** {@code SIGSTOP}: the broker keeps its sockets open and answers nothing until {@link #thaw}. */
  public void freeze() {
    ProcessSignals.stopOrResume(pid(), true, toString());
    frozen = true;
  }

  /** {@code SIGCONT}. */
  public void thaw() {
    ProcessSignals.stopOrResume(pid(), false, toString());
    frozen = false;
  }

  /** True between {@link #freeze()} and {@link #thaw()}. */
  public boolean frozen() {
    return frozen;
  }

  @Override
  public void close() {
    admin.close(Duration.ZERO);
    process.destroyForcibly();
    try {
      if (!process.waitFor(10, TimeUnit.SECONDS)) {
        throw new IllegalStateException(this + " did not exit within 10 s of SIGKILL");
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
    }
    frozen = false;
  }

  @Override
  public String toString() {
    return "PrivateKafkaBroker["
        + bootstrapServers
        + ", pid "
        + process.pid()
        + ", log "
        + log
        + "]";
  }

  /** Registered brokers are the ones a metadata request lists; node 1 is this one. */
  private void awaitReady() {
    Awaitility.await(this + " answering metadata requests with itself registered")
        .atMost(READY_TIMEOUT)
        .pollInterval(Duration.ofMillis(100))
        .ignoreExceptions()
        .until(
            () -> {
              if (!process.isAlive()) {
                throw new IllegalStateException(
                    "the broker exited with " + process.exitValue() + "; see " + log);
              }
              if (!listening()) {
                return false; // the admin client would log every refused connection
              }
              return admin.describeCluster().nodes().get(2, TimeUnit.SECONDS).stream()
                  .anyMatch(node -> node.id() == 1);
            });
  }

  private boolean listening() {
    int port = Integer.parseInt(bootstrapServers.substring(bootstrapServers.lastIndexOf(':') + 1));
    try (Socket socket = new Socket()) {
      socket.connect(new InetSocketAddress(InetAddress.getLoopbackAddress(), port), 1_000);
      return true;
    } catch (IOException e) {
      return false;
    }
  }

  private static void awaitExit(Process format, Path log) throws IOException {
    try {
      if (!format.waitFor(READY_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
        format.destroyForcibly();
        throw new IllegalStateException(
            "kafka.tools.StorageTool format did not finish in " + READY_TIMEOUT + "; see " + log);
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while formatting " + log.getParent(), e);
    }
    if (format.exitValue() != 0) {
      throw new IllegalStateException(
          "kafka.tools.StorageTool format failed ("
              + format.exitValue()
              + "): "
              + Files.readString(log).strip());
    }
  }

  private static Path classpathFile() {
    String named = System.getProperty(CLASSPATH_FILE_VARIABLE);
    if (named == null || named.isBlank()) {
      named = System.getenv(CLASSPATH_FILE_VARIABLE);
    }
    if (named != null && !named.isBlank()) {
      Path file = Path.of(named.trim());
      if (!Files.isReadable(file)) {
        throw new IllegalStateException(
            CLASSPATH_FILE_VARIABLE
                + "="
                + file
                + " is not a readable file; run scripts/services up kafka, which writes it, and"
                + " take the path from scripts/services env");
      }
      return file;
    }
    for (Path dir = Path.of("").toAbsolutePath(); dir != null; dir = dir.getParent()) {
      Path file = dir.resolve(CLASSPATH_FILE_IN_CLONE);
      if (Files.isReadable(file)) {
        return file;
      }
    }
    throw new IllegalStateException(
        "No Kafka installation: neither "
            + CLASSPATH_FILE_VARIABLE
            + " is set nor is there a "
            + CLASSPATH_FILE_IN_CLONE
            + " above "
            + Path.of("").toAbsolutePath()
            + "; run scripts/services up kafka in the clone, or set "
            + CLASSPATH_FILE_VARIABLE
            + " as scripts/services env prints it");
  }

  private static String serverProperties(Path data, int port, int controllerPort) {
    String listeners =
        "PLAINTEXT://127.0.0.1:" + port + ",CONTROLLER://127.0.0.1:" + controllerPort;
    return String.join(
        "\n",
        List.of(
            "process.roles=broker,controller",
            "node.id=1",
            "controller.quorum.bootstrap.servers=127.0.0.1:" + controllerPort,
            "listeners=" + listeners,
            "advertised.listeners=" + listeners,
            "inter.broker.listener.name=PLAINTEXT",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs=" + data.toAbsolutePath(),
            "num.partitions=1",
            "auto.create.topics.enable=false",
            // One node: every internal topic has one replica; few partitions, so the first group
            // or transactional producer does not wait for fifty to be created.
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "transaction.state.log.num.partitions=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "share.coordinator.state.topic.num.partitions=1",
            "group.initial.rebalance.delay.ms=0",
            "group.min.session.timeout.ms=1000",
            "group.consumer.min.session.timeout.ms=1000",
            "group.consumer.session.timeout.ms=6000",
            "group.consumer.min.heartbeat.interval.ms=500",
            "group.consumer.heartbeat.interval.ms=1000",
            ""));
  }

  private static int freePort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    }
  }
}
