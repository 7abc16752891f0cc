package dev.nolock.spring.lock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.lock.FencedLock;
import dev.nolock.lock.InMemoryLockBackend;
import dev.nolock.lock.LockConfig;
import dev.nolock.lock.LockPurpose;
import dev.nolock.lock.postgres.PostgresLockBackend;
import dev.nolock.patterns.LockBackend;
import dev.nolock.spring.autoconfigure.NolockLockAutoConfiguration;
import dev.nolock.spring.internal.LockShutdown;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/** When the lock's beans appear, who wins, and how bad properties fail start-up. */
class NolockLockConditionsTest {

  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(NolockLockAutoConfiguration.class));

  @Test
  void withoutABackendPropertyThereAreNoLockBeans() {
    runner
        .withUserConfiguration(UserBackend.class)
        .withPropertyValues("nolock.lock.purpose=correctness")
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context).doesNotHaveBean(FencedLock.class);
              assertThat(context).doesNotHaveBean(LockShutdown.class);
            });
  }

  @Test
  void withoutTheLockArtifactThereAreNoLockBeans() {
    runner
        .withClassLoader(new FilteredClassLoader(FencedLock.class))
        .withPropertyValues("nolock.lock.backend=postgres", "nolock.lock.purpose=correctness")
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context).doesNotHaveBean(LockBackend.class);
              assertThat(context).doesNotHaveBean("nolockFencedLock");
            });
  }

  /** The backend was asked for by name: its missing artifact is a start-up failure saying so. */
  @Test
  void aSelectedBackendWhoseArtifactIsMissingFailsStartUpNamingIt() {
    runner
        .withClassLoader(new FilteredClassLoader(PostgresLockBackend.class))
        .withPropertyValues("nolock.lock.backend=postgres", "nolock.lock.purpose=correctness")
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContaining("nolock.lock.backend=postgres")
                  .hasMessageContaining("nolock-fenced-lock-postgres");
            });
  }

  @Test
  void theUsersBackendIsUsed() {
    runner
        .withUserConfiguration(UserBackend.class)
        .withPropertyValues("nolock.lock.backend=postgres", "nolock.lock.purpose=efficiency")
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context).getBean(LockBackend.class).isSameAs(UserBackend.BACKEND);
              FencedLock lock = context.getBean(FencedLock.class);
              assertThat(lock.config().purpose()).isEqualTo(LockPurpose.EFFICIENCY);
            });
  }

  @Test
  void theUsersLockWins() {
    runner
        .withUserConfiguration(UserBackend.class, UserLock.class)
        .withPropertyValues("nolock.lock.backend=postgres", "nolock.lock.purpose=efficiency")
        .run(
            context ->
                assertThat(context).getBean(FencedLock.class).isSameAs(context.getBean("myLock")));
  }

  @Test
  void settingsReachTheLock() {
    runner
        .withUserConfiguration(UserBackend.class)
        .withPropertyValues(
            "nolock.lock.backend=postgres",
            "nolock.lock.purpose=correctness",
            "nolock.lock.owner=billing-1",
            "nolock.lock.renewal-interval=2s",
            "nolock.lock.safety-margin=250ms",
            "nolock.lock.clock-drift-ppm=1000",
            "nolock.lock.patience=0ms",
            "nolock.lock.auto-renew=false")
        .run(
            context -> {
              LockConfig config = context.getBean(FencedLock.class).config();
              assertThat(config.purpose()).isEqualTo(LockPurpose.CORRECTNESS);
              assertThat(config.owner()).isEqualTo("billing-1");
              assertThat(config.renewalInterval().get()).hasSeconds(2);
              assertThat(config.safetyMargin()).hasMillis(250);
              assertThat(config.clockDriftPpm()).isEqualTo(1000);
              assertThat(config.patience()).isZero();
              assertThat(config.autoRenew()).isFalse();
            });
  }

  @Test
  void aMissingPurposeFailsStartUpExplainingBoth() {
    runner
        .withUserConfiguration(UserBackend.class)
        .withPropertyValues("nolock.lock.backend=postgres")
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .rootCause()
                  .hasMessageContaining("nolock.lock.purpose")
                  .hasMessageContaining("'correctness'")
                  .hasMessageContaining("'efficiency'")
                  .hasMessageContaining("Fence");
            });
  }

  @Test
  void anUnknownBackendFailsStartUpNamingTheProperty() {
    runner
        .withUserConfiguration(UserBackend.class)
        .withPropertyValues("nolock.lock.backend=mysql", "nolock.lock.purpose=correctness")
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .hasStackTraceContaining("nolock.lock.backend")
                  .hasStackTraceContaining("mysql");
            });
  }

  @Test
  void aNegativeRenewalIntervalFailsStartUpNamingTheProperty() {
    runner
        .withUserConfiguration(UserBackend.class)
        .withPropertyValues(
            "nolock.lock.backend=postgres",
            "nolock.lock.purpose=correctness",
            "nolock.lock.renewal-interval=-1s")
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .hasStackTraceContaining(
                      "nolock.lock.renewal-interval: The renewal interval must be positive");
            });
  }

  @Test
  void aBadPostgresTableFailsStartUpNamingTheProperty() {
    new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(NolockLockAutoConfiguration.class))
        .withBean(javax.sql.DataSource.class, () -> new org.postgresql.ds.PGSimpleDataSource())
        .withPropertyValues(
            "nolock.lock.backend=postgres",
            "nolock.lock.purpose=correctness",
            "nolock.lock.postgres.table=drop table x")
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .hasStackTraceContaining("nolock.lock.postgres.table: ");
            });
  }

  @Configuration(proxyBeanMethods = false)
  static class UserBackend {
    static final InMemoryLockBackend BACKEND = new InMemoryLockBackend();

    @Bean
    LockBackend myBackend() {
      return BACKEND;
    }
  }

  @Configuration(proxyBeanMethods = false)
  static class UserLock {
    @Bean
    FencedLock myLock(LockBackend backend) {
      return FencedLock.create(backend, LockConfig.ofDefaults(LockPurpose.EFFICIENCY));
    }
  }
}
