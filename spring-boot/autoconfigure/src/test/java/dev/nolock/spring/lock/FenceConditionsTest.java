package dev.nolock.spring.lock;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.sql.Fence;
import dev.nolock.spring.autoconfigure.NolockFenceAutoConfiguration;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.postgresql.ds.PGSimpleDataSource;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** When the fence bean appears, who wins, and how a bad table name fails start-up. */
class FenceConditionsTest {

  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(NolockFenceAutoConfiguration.class))
          .withBean(DataSource.class, PGSimpleDataSource::new);

  @Test
  void aFenceWithADataSource() {
    runner.run(context -> assertThat(context).hasNotFailed().hasSingleBean(Fence.class));
  }

  @Test
  void noFenceWithoutADataSource() {
    new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(NolockFenceAutoConfiguration.class))
        .run(context -> assertThat(context).hasNotFailed().doesNotHaveBean(Fence.class));
  }

  @Test
  void noFenceWithoutPatternsSql() {
    runner
        .withClassLoader(new FilteredClassLoader(Fence.class))
        .run(context -> assertThat(context).hasNotFailed().doesNotHaveBean(Fence.class));
  }

  @Test
  void theUsersFenceWins() {
    Fence mine = Fence.onTable("my_fences");
    runner
        .withBean("myFence", Fence.class, () -> mine)
        .run(context -> assertThat(context).getBean(Fence.class).isSameAs(mine));
  }

  @Test
  void aBadTableFailsStartUpNamingTheProperty() {
    runner
        .withPropertyValues("nolock.fence.table=Fences; drop")
        .run(
            context -> {
              assertThat(context).hasFailed();
              assertThat(context.getStartupFailure())
                  .hasStackTraceContaining("nolock.fence.table: ");
            });
  }
}
