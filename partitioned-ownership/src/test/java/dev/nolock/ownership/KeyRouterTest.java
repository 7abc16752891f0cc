package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.util.Random;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.common.serialization.LongSerializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.junit.jupiter.api.Test;

class KeyRouterTest {

  @Test
  void partitionForMatchesTheProducersBuiltInPartitionerForRandomKeys() {
    Random random = new Random(7);
    for (int i = 0; i < 10_000; i++) {
      byte[] key = new byte[random.nextInt(64)];
      random.nextBytes(key);
      int partitions = 1 + random.nextInt(100);
      assertThat(KeyRouter.partitionFor(key, partitions))
          .isEqualTo(BuiltInPartitioner.partitionForKey(key, partitions));
    }
  }

  @Test
  void partitionForAgreesWithKafkasPublishedMurmur2Vectors() {
    // Utils.murmur2("21") = -973932308, ("foobar") = -790332482, ("abc") = 479470107.
    assertThat(KeyRouter.partitionFor(bytes("21"), 1_000_000))
        .isEqualTo((-973932308 & 0x7fffffff) % 1_000_000);
    assertThat(KeyRouter.partitionFor(bytes("foobar"), 1_000_000))
        .isEqualTo((-790332482 & 0x7fffffff) % 1_000_000);
    assertThat(KeyRouter.partitionFor(bytes("abc"), 1_000_000)).isEqualTo(479470107 % 1_000_000);
  }

  @Test
  void theRouterHashesTheSerializedKey() {
    KeyRouter<String> strings = KeyRouter.create("orders", 12, new StringSerializer());
    assertThat(strings.partitionOf("customer-42"))
        .isEqualTo(BuiltInPartitioner.partitionForKey(bytes("customer-42"), 12));
    KeyRouter<Long> longs = KeyRouter.create("orders", 12, new LongSerializer());
    assertThat(longs.partitionOf(42L))
        .isEqualTo(
            BuiltInPartitioner.partitionForKey(new LongSerializer().serialize("orders", 42L), 12));
  }

  @Test
  void aRecordFromTheRouterCarriesItsPartitionExplicitly() {
    KeyRouter<String> router = KeyRouter.create("orders", 6, new StringSerializer());
    ProducerRecord<String, String> record = router.record("customer-7", "debit 5");
    assertThat(record.topic()).isEqualTo("orders");
    assertThat(record.partition()).isEqualTo(router.partitionOf("customer-7"));
    assertThat(record.key()).isEqualTo("customer-7");
    assertThat(record.value()).isEqualTo("debit 5");
  }

  @Test
  void badArgumentsAreRefusedWithAMessageThatSaysWhatToPass() {
    assertThatThrownBy(() -> KeyRouter.create("orders", 0, new StringSerializer()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("partition count");
    assertThatThrownBy(() -> KeyRouter.create("bad topic!", 3, new StringSerializer()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("[a-zA-Z0-9._-]");
    assertThatThrownBy(() -> KeyRouter.partitionFor(null, 3))
        .isInstanceOf(NullPointerException.class)
        .hasMessageContaining("route commands by key");
    KeyRouter<String> router = KeyRouter.create("orders", 6, new StringSerializer());
    assertThatThrownBy(() -> router.partitionOf(null)).isInstanceOf(NullPointerException.class);
  }

  private static byte[] bytes(String s) {
    return s.getBytes(StandardCharsets.UTF_8);
  }
}
