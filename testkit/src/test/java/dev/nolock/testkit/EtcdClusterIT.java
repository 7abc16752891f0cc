package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.Test;

/**
 * {@link EtcdCluster} on its own: a port taken between picking it and etcd binding it, and what
 * {@link EtcdCluster#close()} leaves behind.
 */
class EtcdClusterIT {

  /**
   * The first pick hands one member a port another socket holds (what another process binding a
   * picked port before etcd does); the cluster still starts, on ports it could bind.
   */
  @Test
  void aPortTakenBeforeEtcdBindsItIsReplaced() throws IOException {
    Path directory = Path.of("target", "etcd-cluster", "it-" + UUID.randomUUID());
    AtomicInteger picks = new AtomicInteger();
    try (ServerSocket taken = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
      EtcdCluster.PortPicker picker =
          count -> {
            List<Integer> ports = new ArrayList<>(freePorts(count));
            if (picks.getAndIncrement() == 0) {
              ports.set(1, taken.getLocalPort()); // m0's peer port
            }
            return ports;
          };
      List<EtcdCluster> started = new ArrayList<>();
      assertThatCode(() -> started.add(EtcdCluster.start(directory, picker)))
          .as("starting a cluster whose first pick includes a taken port")
          .doesNotThrowAnyException();
      EtcdCluster cluster = started.get(0);
      try {
        assertThat(picks).as("port picks").hasValue(2);
        assertThat(Files.readString(directory.resolve("m0.log")))
            .as("the first attempt's m0, given the taken port")
            .contains("bind: address already in use");
        assertThat(cluster.leader().running()).isTrue();
      } finally {
        cluster.close();
      }
    }
  }

  @Test
  void closeKillsEveryMemberAndRemovesTheShutdownHook() throws IOException {
    EtcdCluster cluster =
        EtcdCluster.start(Path.of("target", "etcd-cluster", "it-" + UUID.randomUUID()));
    cluster.close();

    assertThat(cluster.members()).noneMatch(EtcdCluster.Member::running);
    assertThat(Runtime.getRuntime().removeShutdownHook(cluster.shutdownHook))
        .as("the cluster's shutdown hook was still registered after close()")
        .isFalse();
  }

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
}
