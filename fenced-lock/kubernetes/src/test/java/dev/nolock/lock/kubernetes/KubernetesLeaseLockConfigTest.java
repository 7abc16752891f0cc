package dev.nolock.lock.kubernetes;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.LeaseClock;
import dev.nolock.patterns.ManualLeaseClock;
import java.time.Clock;
import java.time.Duration;
import java.time.Instant;
import java.time.ZoneOffset;
import org.assertj.core.data.Offset;
import org.junit.jupiter.api.Test;

class KubernetesLeaseLockConfigTest {

  @Test
  void aConfigWithoutANamespaceIsRefusedWithHowToNameOne() {
    assertThatThrownBy(() -> KubernetesLeaseLockConfig.custom().build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("no namespace")
        .hasMessageContaining(".namespace(")
        .hasMessageContaining("POD_NAMESPACE");
    assertThatThrownBy(() -> KubernetesLeaseLockConfig.custom().leaseNamePrefix("billing-").build())
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("no namespace");
  }

  @Test
  void theNamespaceNamedIsTheOneUsed() {
    assertThat(KubernetesLeaseLockConfig.custom().namespace("billing").build().namespace())
        .isEqualTo("billing");
  }

  @Test
  void anEmptyLeaseNamePrefixIsRefusedSoLeasesNeverTakeABareLockName() {
    assertThatThrownBy(() -> KubernetesLeaseLockConfig.custom().leaseNamePrefix(""))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Lease name prefix")
        .hasMessageContaining("empty")
        .hasMessageContaining("\"nolock-\"");
    assertThat(
            KubernetesLeaseLockConfig.custom()
                .namespace("billing")
                .leaseNamePrefix("billing-")
                .build()
                .leaseName("leader"))
        .isEqualTo("billing-leader");
  }

  @Test
  void theDefaultsAreTheDocumentedPrefixAndClocks() {
    KubernetesLeaseLockConfig config = billing().build();

    assertThat(config.leaseNamePrefix()).isEqualTo("nolock-");
    assertThat(config.leaseName("invoice-42")).isEqualTo("nolock-invoice-42");
    assertThat(config.clock().nanoTime())
        .isCloseTo(LeaseClock.system().nanoTime(), Offset.offset(Duration.ofMinutes(1).toNanos()));
    assertThat(config.wallClock().getZone()).isEqualTo(ZoneOffset.UTC);
  }

  @Test
  void leaseNamesMustBeDns1123SubdomainsAndAreNeverMapped() {
    KubernetesLeaseLockConfig config = billing().build();
    KubernetesLeaseLockConfig shortest = billing().leaseNamePrefix("x").build();

    assertThat(config.leaseName("billing.eu-1")).isEqualTo("nolock-billing.eu-1");
    assertThat(shortest.leaseName("a")).isEqualTo("xa");
    assertThat(shortest.leaseName("a".repeat(252))).hasSize(253);
    for (String bad : new String[] {"Upper", "under_score", "slash/x", "trailing-", "a..b", ""}) {
      assertThatThrownBy(() -> config.leaseName(bad))
          .as(bad)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("DNS-1123 subdomain");
    }
    assertThatThrownBy(() -> shortest.leaseName("a".repeat(253)))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("253");
  }

  @Test
  void badNamespacesAndPrefixesAreRefusedWithTheRule() {
    assertThatThrownBy(() -> KubernetesLeaseLockConfig.custom().namespace("Billing"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("DNS-1123 label");
    assertThatThrownBy(() -> KubernetesLeaseLockConfig.custom().namespace("a.b"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> KubernetesLeaseLockConfig.custom().namespace("a".repeat(64)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> KubernetesLeaseLockConfig.custom().leaseNamePrefix("-x"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("nolock-");
    assertThatThrownBy(() -> KubernetesLeaseLockConfig.custom().leaseNamePrefix("A-"))
        .isInstanceOf(IllegalArgumentException.class);
  }

  @Test
  void theClocksAreInjectedPerInstance() {
    ManualLeaseClock clock = new ManualLeaseClock(42);
    Clock wall = Clock.fixed(Instant.EPOCH, ZoneOffset.UTC);

    KubernetesLeaseLockConfig config = billing().clock(clock).wallClock(wall).build();

    assertThat(config.clock()).isSameAs(clock);
    assertThat(config.wallClock()).isSameAs(wall);
    assertThatThrownBy(() -> KubernetesLeaseLockConfig.custom().clock(null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("clock is null");
  }

  @Test
  void rememberedNamesDefaultsToTenThousandAndMustBeFromOneToTenMillion() {
    assertThat(billing().build().rememberedNames()).isEqualTo(10_000);
    assertThat(billing().rememberedNames(1).build().rememberedNames()).isEqualTo(1);
    assertThat(billing().rememberedNames(10_000_000).build().rememberedNames())
        .isEqualTo(10_000_000);
    for (int bad : new int[] {0, -1, 10_000_001}) {
      assertThatThrownBy(() -> KubernetesLeaseLockConfig.custom().rememberedNames(bad))
          .as("rememberedNames(%d)", bad)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("from 1 to 10000000")
          .hasMessageContaining("number of lock names one process uses");
    }
  }

  @Test
  void theTtlIsStoredInWholeSecondsRoundedUp() {
    assertThat(KubernetesLeaseLockBackend.leaseSeconds(Duration.ofMillis(1))).isEqualTo(1);
    assertThat(KubernetesLeaseLockBackend.leaseSeconds(Duration.ofSeconds(1))).isEqualTo(1);
    assertThat(KubernetesLeaseLockBackend.leaseSeconds(Duration.ofMillis(1001))).isEqualTo(2);
    assertThat(KubernetesLeaseLockBackend.leaseSeconds(Duration.ofSeconds(15))).isEqualTo(15);
    assertThat(KubernetesLeaseLockBackend.leaseSeconds(Duration.ofDays(7))).isEqualTo(604_800);
    assertThatThrownBy(() -> KubernetesLeaseLockBackend.leaseSeconds(Duration.ofDays(8)))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> KubernetesLeaseLockBackend.leaseSeconds(Duration.ofMillis(-1)))
        .isInstanceOf(IllegalArgumentException.class);
  }

  private static KubernetesLeaseLockConfig.Builder billing() {
    return KubernetesLeaseLockConfig.custom().namespace("billing");
  }
}
