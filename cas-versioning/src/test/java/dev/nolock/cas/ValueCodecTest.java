package dev.nolock.cas;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.math.BigDecimal;
import org.jooq.JSONB;
import org.junit.jupiter.api.Test;

class ValueCodecTest {

  @Test
  void theReadyCodecsStoreValuesAsTheyAre() {
    assertThat(ValueCodec.longs().storedType()).isEqualTo(Long.class);
    assertThat(ValueCodec.longs().decode(ValueCodec.longs().encode(42L))).isEqualTo(42L);
    assertThat(ValueCodec.strings().storedType()).isEqualTo(String.class);
    assertThat(ValueCodec.strings().encode("a")).isEqualTo("a");
  }

  @Test
  void aJsonCodecWrapsTheCallersMapperInJsonb() {
    ValueCodec<BigDecimal, JSONB> codec =
        ValueCodec.json(amount -> "{\"amount\": " + amount + "}", Amounts::parse);

    JSONB stored = codec.encode(new BigDecimal("12.50"));

    assertThat(codec.storedType()).isEqualTo(JSONB.class);
    assertThat(stored.data()).isEqualTo("{\"amount\": 12.50}");
    assertThat(codec.decode(stored)).isEqualByComparingTo("12.50");
  }

  @Test
  void aStoredTypeJooqCannotBindIsRefusedWithAMessage() {
    assertThatThrownBy(() -> ValueCodec.of(Object.class, v -> v, v -> v))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("no PostgreSQL type");
  }

  /** A JSON "mapper" small enough for a test. */
  static final class Amounts {
    static BigDecimal parse(String json) {
      String number = json.replaceAll("[^0-9.]", "");
      return new BigDecimal(number);
    }
  }
}
