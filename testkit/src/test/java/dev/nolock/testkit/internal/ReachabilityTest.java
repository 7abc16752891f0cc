package dev.nolock.testkit.internal;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.testkit.ServerUnreachableException;
import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.util.List;
import org.junit.jupiter.api.Test;

class ReachabilityTest {

  @Test
  void closedPortFailsWithTheVariableAndTheStartCommand() throws IOException {
    int port = closedLoopbackPort();

    assertThatThrownBy(
            () ->
                Reachability.requireReachable(
                    Server.KAFKA, List.of(new HostPort("127.0.0.1", port))))
        .isInstanceOf(ServerUnreachableException.class)
        .hasMessageStartingWith(
            "Kafka is not reachable at 127.0.0.1:"
                + port
                + " (NOLOCK_KAFKA_BOOTSTRAP). Start it with: scripts/services up kafka");
  }

  @Test
  void unknownHostFailsTheSameWay() {
    assertThatThrownBy(
            () ->
                Reachability.requireReachable(
                    Server.ETCD, List.of(new HostPort("no-such-host.invalid", 2379))))
        .isInstanceOf(ServerUnreachableException.class)
        .hasMessageContaining("scripts/services up etcd")
        .hasMessageContaining("unknown host");
  }

  @Test
  void oneListeningHostOfSeveralIsEnough() throws IOException {
    int closed = closedLoopbackPort();
    try (ServerSocket listening = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      List<HostPort> hosts =
          List.of(
              new HostPort("127.0.0.1", closed),
              new HostPort("127.0.0.1", listening.getLocalPort()));

      assertThatCode(() -> Reachability.requireReachable(Server.KAFKA, hosts))
          .doesNotThrowAnyException();
    }
  }

  /** A loopback port nothing listens on: bound once by us, then released. */
  static int closedLoopbackPort() throws IOException {
    try (ServerSocket socket = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      return socket.getLocalPort();
    }
  }
}
