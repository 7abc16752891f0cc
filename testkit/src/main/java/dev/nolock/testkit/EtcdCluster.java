package dev.nolock.testkit;

import dev.nolock.testkit.internal.ProcessSignals;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.ClientBuilder;
import io.etcd.jetcd.maintenance.StatusResponse;
import java.io.File;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import java.util.function.IntFunction;
import java.util.stream.Collectors;
import java.util.stream.IntStream;
import java.util.stream.Stream;
import org.awaitility.Awaitility;

/**
 * A three-member etcd cluster of its own on loopback, for tests that need a leader change, or a
 * member to freeze or kill, without touching the shared etcd of {@link EtcdExtension}. Made by
 * {@link EtcdClusterExtension}.
 *
 * <p>Guarantees, in order:
 *
 * <ol>
 *   <li>{@link #start(Path)} launches three {@code etcd} processes (the binary found on {@code
 *       PATH}) on free loopback ports, each with its own data directory and log file under the
 *       given directory (started again on new ports if another process took one first), with a 50
 *       ms heartbeat and a 500 ms election timeout (so an election takes about a second, and etcd's
 *       minimum lease TTL is 1 s); it returns once every member answers a status request and all of
 *       them name the same leader.
 *   <li>{@link #leader()} waits until every member that is neither frozen nor stopped names the
 *       same leader, itself one of them, and returns it: after a freeze or a stop of the leader,
 *       that is the newly elected one.
 *   <li>{@link #awaitNoLeader(Member)} waits until a member names no leader (after the loss of a
 *       majority).
 *   <li>{@link #moveLeader(Member)} asks the leader to hand over leadership (etcd's {@code
 *       MoveLeader}, what {@code etcdctl move-leader} sends) and returns once every running member
 *       names the target.
 *   <li>{@link #freeze(Member)} and {@link #thaw(Member)} send {@code SIGSTOP} and {@code SIGCONT}
 *       and return once the kernel reports the new state; {@link #stop(Member)} kills a member
 *       ({@code SIGKILL}) and {@link #restart(Member)} starts it again on its data directory.
 *   <li>{@link #close()} kills every member (all of them, then reports any that did not exit) and
 *       removes the shutdown hook that kills them if the JVM ends first; the data directories stay
 *       for a failed test's logs.
 * </ol>
 *
 * Needs {@code io.etcd:jetcd-core} and the {@code etcd} binary (Debian: {@code etcd-server}).
 */
public final class EtcdCluster implements AutoCloseable {

  /** How long starting the cluster, or waiting for a leader, may take. */
  public static final Duration READY_TIMEOUT = Duration.ofSeconds(30);

  private static final Duration CALL_TIMEOUT = Duration.ofSeconds(2);

  private static final int START_ATTEMPTS = 3;

  private final List<Member> members;
  final Thread shutdownHook = new Thread(this::close, "etcd-cluster-stop");

  private EtcdCluster(List<Member> members) {
    this.members = List.copyOf(members);
  }

  /** Starts three members with their data under {@code directory}, which must not exist yet. */
  public static EtcdCluster start(Path directory) throws IOException {
    return start(directory, EtcdCluster::freePorts);
  }

  /** Picks {@code count} distinct loopback ports. */
  interface PortPicker {
    List<Integer> pick(int count) throws IOException;
  }

  /**
   * Starts the cluster on ports from {@code picker}, at most {@value #START_ATTEMPTS} times: a
   * picked port is free when picked, but another process may bind it before etcd does; the member
   * then exits with {@code bind: address already in use}, and the whole cluster is killed and
   * started again on new ports, in a new data directory {@code retry-<n>} under {@code directory}
   * (a member that did start has already recorded the old ports in its data).
   */
  static EtcdCluster start(Path directory, PortPicker picker) throws IOException {
    String binary = etcdBinary();
    Files.createDirectories(directory.getParent());
    Files.createDirectory(directory);
    for (int attempt = 1; ; attempt++) {
      Path data = attempt == 1 ? directory : directory.resolve("retry-" + attempt);
      EtcdCluster cluster =
          new EtcdCluster(
              members(binary, data, "nolock-" + directory.getFileName() + "-" + attempt, picker));
      // A test JVM that ends without closing the cluster (killed fork, System.exit) leaves no etcd.
      Runtime.getRuntime().addShutdownHook(cluster.shutdownHook);
      try {
        for (Member member : cluster.members) {
          member.launch();
        }
        for (Member member : cluster.members) {
          member.id = cluster.status(member, READY_TIMEOUT).getHeader().getMemberId();
        }
        cluster.leader();
        return cluster;
      } catch (RuntimeException | IOException e) {
        try {
          cluster.close();
        } catch (RuntimeException notKilled) {
          e.addSuppressed(notKilled);
          throw e;
        }
        if (attempt == START_ATTEMPTS || !cluster.lostABindRace()) {
          throw e;
        }
      }
    }
  }

  private static List<Member> members(
      String binary, Path directory, String token, PortPicker picker) throws IOException {
    Files.createDirectories(directory);
    List<Integer> ports = picker.pick(6);
    IntFunction<String> clientUrl = i -> "http://127.0.0.1:" + ports.get(2 * i);
    IntFunction<String> peerUrl = i -> "http://127.0.0.1:" + ports.get(2 * i + 1);
    String initialCluster =
        IntStream.range(0, 3)
            .mapToObj(i -> "m" + i + "=" + peerUrl.apply(i))
            .collect(Collectors.joining(","));
    List<Member> members = new ArrayList<>();
    for (int i = 0; i < 3; i++) {
      members.add(
          new Member(
              "m" + i,
              List.of(
                  binary,
                  "--name",
                  "m" + i,
                  "--data-dir",
                  directory.resolve("m" + i).toString(),
                  "--listen-client-urls",
                  clientUrl.apply(i),
                  "--advertise-client-urls",
                  clientUrl.apply(i),
                  "--listen-peer-urls",
                  peerUrl.apply(i),
                  "--initial-advertise-peer-urls",
                  peerUrl.apply(i),
                  "--initial-cluster",
                  initialCluster,
                  "--initial-cluster-token",
                  token,
                  "--initial-cluster-state",
                  "new",
                  "--heartbeat-interval",
                  "50",
                  "--election-timeout",
                  "500",
                  "--log-level",
                  "warn"),
              directory.resolve("m" + i + ".log")));
    }
    return members;
  }

  /** Whether a member's log says it could not bind one of its ports. */
  private boolean lostABindRace() {
    return members.stream().anyMatch(Member::lostABindRace);
  }

  /** The three members, in start order. */
  public List<Member> members() {
    return members;
  }

  /** Every member's client URL, comma-separated, as jetcd's and etcdctl's endpoints take them. */
  public String endpoints() {
    return members.stream().map(Member::clientUrl).collect(Collectors.joining(","));
  }

  /** A jetcd client on all three members; the caller closes it. */
  public Client newClient() {
    return clientBuilder().build();
  }

  /** A jetcd client builder with all three members as endpoints, for more settings. */
  public ClientBuilder clientBuilder() {
    return Client.builder()
        .endpoints(members.stream().map(m -> URI.create(m.clientUrl())).toArray(URI[]::new))
        .connectTimeout(CALL_TIMEOUT);
  }

  /**
   * Waits until every running (neither frozen nor stopped) member names the same leader, itself
   * running, and returns it.
   */
  public Member leader() {
    return Awaitility.await("one leader named by every running member of " + this)
        .atMost(READY_TIMEOUT)
        .pollInterval(Duration.ofMillis(20))
        .ignoreExceptions()
        .until(this::agreedLeader, Optional::isPresent)
        .orElseThrow();
  }

  /**
   * Waits until {@code member} names no leader: it lost its leader and, having no majority, cannot
   * elect one (so it refuses requests that need a leader).
   */
  public void awaitNoLeader(Member member) {
    Awaitility.await(member + " naming no leader")
        .atMost(READY_TIMEOUT)
        .pollInterval(Duration.ofMillis(20))
        .ignoreExceptions()
        .until(() -> status(member, CALL_TIMEOUT).getLeader() == 0);
  }

  /** The running members other than the leader, in start order. */
  public List<Member> followers() {
    Member leader = leader();
    return members.stream().filter(m -> m != leader && m.running()).toList();
  }

  /**
   * Hands leadership to {@code target} and waits until every running member names it.
   *
   * @throws IllegalArgumentException if {@code target} is not running
   */
  public void moveLeader(Member target) {
    if (!target.running()) {
      throw new IllegalArgumentException(
          target + " is frozen or stopped; thaw or restart it first");
    }
    Member leader = leader();
    if (leader == target) {
      return;
    }
    try (Client client = single(leader)) {
      client
          .getMaintenanceClient()
          .moveLeader(target.id())
          .get(READY_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
    } catch (Exception e) {
      if (e instanceof InterruptedException) {
        Thread.currentThread().interrupt();
      }
      throw new IllegalStateException("etcd refused to move the leader to " + target, e);
    }
    Awaitility.await("every running member naming " + target + " the leader")
        .atMost(READY_TIMEOUT)
        .pollInterval(Duration.ofMillis(20))
        .ignoreExceptions()
        .until(() -> agreedLeader().filter(target::equals).isPresent());
  }

  /** {@code SIGSTOP}: the member keeps its sockets open and answers nothing. */
  public void freeze(Member member) {
    member.stopOrResume(true);
    member.frozen = true;
  }

  /** {@code SIGCONT}. */
  public void thaw(Member member) {
    member.stopOrResume(false);
    member.frozen = false;
  }

  /** {@code SIGKILL}, waiting for the process to end. */
  public void stop(Member member) {
    member.kill();
  }

  /** Starts a stopped member again on its own data directory. */
  public void restart(Member member) throws IOException {
    if (member.process != null && member.process.isAlive()) {
      throw new IllegalStateException(member + " is still running; stop it first");
    }
    member.launch();
    status(member, READY_TIMEOUT);
  }

  /**
   * Kills every member, even if killing one fails, then reports the failures; unregisters the
   * shutdown hook, so a test run that starts many clusters keeps no closed one reachable.
   *
   * @throws IllegalStateException if a member did not exit, with one suppressed exception each
   */
  @Override
  public void close() {
    try {
      Runtime.getRuntime().removeShutdownHook(shutdownHook);
    } catch (IllegalStateException shutdownInProgress) {
      // This is the hook running (or the JVM is ending anyway): the members are killed below.
    }
    IllegalStateException failure = null;
    for (Member member : members) {
      try {
        member.kill();
      } catch (RuntimeException e) {
        if (failure == null) {
          failure = new IllegalStateException("could not kill every member of " + this);
        }
        failure.addSuppressed(e);
      }
    }
    if (failure != null) {
      throw failure;
    }
  }

  private Optional<Member> agreedLeader() throws Exception {
    List<Member> running = members.stream().filter(Member::running).toList();
    List<Long> named = new ArrayList<>();
    for (Member member : running) {
      named.add(status(member, CALL_TIMEOUT).getLeader());
    }
    if (named.stream().distinct().count() != 1) {
      return Optional.empty();
    }
    return running.stream().filter(m -> m.id() == named.get(0)).findFirst();
  }

  private StatusResponse status(Member member, Duration timeout) {
    return Awaitility.await("a status answer from " + member)
        .atMost(timeout)
        .pollInterval(Duration.ofMillis(20))
        .failFast(member + " exited; its log says why", () -> !member.process.isAlive())
        .ignoreExceptions()
        .until(
            () -> {
              try (Client client = single(member)) {
                return client
                    .getMaintenanceClient()
                    .statusMember(member.clientUrl())
                    .get(CALL_TIMEOUT.toMillis(), TimeUnit.MILLISECONDS);
              }
            },
            Objects::nonNull);
  }

  private static Client single(Member member) {
    return Client.builder().endpoints(member.clientUrl()).connectTimeout(CALL_TIMEOUT).build();
  }

  private static String etcdBinary() {
    String path = Objects.requireNonNullElse(System.getenv("PATH"), "");
    return Stream.of(path.split(File.pathSeparator))
        .map(dir -> Path.of(dir, "etcd"))
        .filter(Files::isExecutable)
        .findFirst()
        .map(Path::toString)
        .orElseThrow(
            () ->
                new IllegalStateException(
                    "No etcd binary on PATH; install etcd (Debian: apt-get install etcd-server)"));
  }

  /**
   * Ports the kernel hands out as free, all bound at once so that they are distinct, and released
   * just before etcd binds them ({@link #start(Path, PortPicker)} retries if one was taken since).
   */
  private static List<Integer> freePorts(int count) throws IOException {
    List<ServerSocket> sockets = new ArrayList<>();
    try {
      for (int i = 0; i < count; i++) {
        sockets.add(new ServerSocket(0, 1, InetAddress.getLoopbackAddress()));
      }
      return sockets.stream().map(ServerSocket::getLocalPort).toList();
    } finally {
      for (ServerSocket socket : sockets) {
        socket.close();
      }
    }
  }

  @Override
  public String toString() {
    return "EtcdCluster" + members;
  }

  /** One etcd process of the cluster. */
  public static final class Member {
    private final String name;
    private final List<String> command;
    private final Path log;
    private volatile Process process;
    private volatile long id;
    private volatile boolean frozen;

    private Member(String name, List<String> command, Path log) {
      this.name = name;
      this.command = command;
      this.log = log;
    }

    /** {@code m0}, {@code m1} or {@code m2}. */
    public String name() {
      return name;
    }

    /** etcd's member id. */
    public long id() {
      return id;
    }

    /** {@code http://127.0.0.1:<port>}. */
    public String clientUrl() {
      return command.get(command.indexOf("--advertise-client-urls") + 1);
    }

    /** The operating system's process id of the running process. */
    public long pid() {
      return process.pid();
    }

    /** Neither frozen nor stopped. */
    public boolean running() {
      return process != null && process.isAlive() && !frozen;
    }

    private void launch() throws IOException {
      process =
          new ProcessBuilder(command)
              .redirectErrorStream(true)
              .redirectOutput(ProcessBuilder.Redirect.appendTo(log.toFile()))
              .start();
      frozen = false;
    }

    private void stopOrResume(boolean stop) {
      ProcessSignals.stopOrResume(pid(), stop, toString());
    }

    private boolean lostABindRace() {
      try {
        return Files.exists(log) && Files.readString(log).contains("address already in use");
      } catch (IOException e) {
        throw new UncheckedIOException(e);
      }
    }

    private void kill() {
      Process p = process;
      if (p == null) {
        return;
      }
      p.destroyForcibly();
      try {
        if (!p.waitFor(10, TimeUnit.SECONDS)) {
          throw new IllegalStateException(this + " did not exit within 10 s of SIGKILL");
        }
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
      frozen = false;
    }

    @Override
    public String toString() {
      return name + "(" + clientUrl() + ", log " + log + ")";
    }
  }
}
