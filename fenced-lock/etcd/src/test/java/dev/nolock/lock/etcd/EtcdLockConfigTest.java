package dev.nolock.lock.etcd;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.HashSet;
import java.util.List;
import java.util.Set;
import org.junit.jupiter.api.Test;

class EtcdLockConfigTest {

  @Test
  void aPrefixThatDoesNotEndInASlashIsRefusedSoTwoApplicationsCannotShareAKey() {
    // "/app" + lock "2x" and "/app2" + lock "x" would both be the key "/app2x".
    assertThatThrownBy(() -> EtcdLockConfig.custom().keyPrefix("/app"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("\"/app\"")
        .hasMessageContaining("end")
        .hasMessageContaining("\"/app/\"");
    assertThatThrownBy(() -> EtcdLockConfig.custom().keyPrefix("/app2"))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void aPrefixEndingInASlashIsTakenAndTheDefaultEndsInOne() {
    assertThat(EtcdLockConfig.custom().keyPrefix("/app/").build().keyPrefix()).isEqualTo("/app/");
    assertThat(EtcdLockConfig.custom().keyPrefix("app2/").build().keyPrefix()).isEqualTo("app2/");
    assertThat(EtcdLockConfig.ofDefaults().keyPrefix()).isEqualTo("/nolock/lock/");
  }

  @Test
  void blankControlCharacterWhitespaceAndOverlongPrefixesAreRefused() {
    for (String prefix : new String[] {"", " /", "/a b/", "/a\u0007/", "/" + "x".repeat(200)}) {
      assertThatThrownBy(() -> EtcdLockConfig.custom().keyPrefix(prefix))
          .as("\"%s\"", prefix)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("prefix");
    }
  }

  @Test
  void theKeyIsThePrefixAndTheNameWithSlashAndPercentEscaped() {
    EtcdLockConfig config = EtcdLockConfig.custom().keyPrefix("/app/").build();

    assertThat(config.lockKey("invoice-42")).isEqualTo("/app/invoice-42");
    assertThat(config.lockKey("billing/invoice-42")).isEqualTo("/app/billing%2Finvoice-42");
    assertThat(config.lockKey("100%")).isEqualTo("/app/100%25");
    assertThat(EtcdLockConfig.ofDefaults().lockKey("x")).isEqualTo("/nolock/lock/x");
  }

  @Test
  void nestedPrefixesAndLookalikeNamesNeverShareAKey() {
    EtcdLockConfig app = EtcdLockConfig.custom().keyPrefix("/app/").build();
    EtcdLockConfig billing = EtcdLockConfig.custom().keyPrefix("/app/billing/").build();
    List<String> names = List.of("a/b", "a%2Fb", "a%252Fb", "a", "b", "billing/a");
    Set<String> keys = new HashSet<>();
    for (String name : names) {
      keys.add(app.lockKey(name));
      keys.add(billing.lockKey(name));
    }
    assertThat(keys).hasSize(names.size() * 2);
    // The negative control: the plain concatenation of prefix and name collides.
    assertThat("/app/" + "billing/a").isEqualTo("/app/billing/" + "a");
  }

  @Test
  void badLockNamesAreRefusedWithTheFix() {
    EtcdLockConfig config = EtcdLockConfig.ofDefaults();
    for (String name : new String[] {"", " ", "a\nb", "x".repeat(256)}) {
      assertThatThrownBy(() -> config.lockKey(name))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("lock name");
    }
    assertThatThrownBy(() -> config.lockKey(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
  }
}
