package dev.nolock.spring.internal;

import dev.nolock.spring.FencedScheduled;
import dev.nolock.spring.Idempotent;
import dev.nolock.spring.JobHandler;
import dev.nolock.spring.LeadershipListener;
import dev.nolock.spring.PartitionHandler;
import java.lang.annotation.Annotation;
import java.util.List;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;

/**
 * Fails start-up when the application uses one of the starter's annotations (or a {@link
 * LeadershipListener}) whose auto-configuration did not run: the method would otherwise never run
 * ({@code @JobHandler}, {@code @FencedScheduled}, {@code @PartitionHandler}, a listener), or run
 * without its protection ({@code @Idempotent}), and nothing would say so. A second {@code
 * DataSource} without {@code @Primary}, or a missing pattern artifact, is enough to switch one off.
 */
public final class InactiveAnnotations implements SmartInitializingSingleton, BeanFactoryAware {

  /** An annotation, the bean type that runs it, and what that bean needs. */
  private record Use(Class<? extends Annotation> annotation, String runner, String needs) {}

  private static final String ONE_DATA_SOURCE =
      "exactly one DataSource bean (or one marked @Primary)";

  private static final List<Use> USES =
      List.of(
          new Use(
              Idempotent.class,
              "dev.nolock.spring.internal.IdempotentMethods",
              "nolock-idempotency-http on the classpath, a servlet web application (Spring MVC)"
                  + " and "
                  + ONE_DATA_SOURCE),
          new Use(
              FencedScheduled.class,
              "dev.nolock.spring.internal.ScheduledJobs",
              "nolock-scheduled-singleton on the classpath and " + ONE_DATA_SOURCE),
          new Use(
              PartitionHandler.class,
              "dev.nolock.spring.PartitionOwners",
              "nolock-partitioned-ownership on the classpath and " + ONE_DATA_SOURCE),
          new Use(
              JobHandler.class,
              "dev.nolock.spring.internal.QueueWorkers",
              "nolock-skip-locked-queue on the classpath and " + ONE_DATA_SOURCE));

  private ConfigurableListableBeanFactory beanFactory;

  @Override
  public void setBeanFactory(BeanFactory beanFactory) {
    this.beanFactory = (ConfigurableListableBeanFactory) beanFactory;
  }

  @Override
  public void afterSingletonsInstantiated() {
    for (Use use : USES) {
      if (present(use.runner())) {
        continue;
      }
      AnnotatedMethods.forEach(
          beanFactory,
          use.annotation(),
          (beanName, method, annotation) -> {
            throw inactive(
                "@"
                    + use.annotation().getSimpleName()
                    + " on bean '"
                    + beanName
                    + "', method "
                    + method.toGenericString(),
                use.needs());
          });
      for (String beanName : beanFactory.getBeanNamesForAnnotation(use.annotation())) {
        throw inactive(
            "@" + use.annotation().getSimpleName() + " on bean '" + beanName + "'", use.needs());
      }
    }
    if (!present("dev.nolock.spring.Leaders")) {
      for (String beanName : beanFactory.getBeanNamesForType(LeadershipListener.class)) {
        throw inactive(
            "LeadershipListener bean '" + beanName + "'",
            "nolock-fenced-lock on the classpath and a lock backend (nolock.lock.backend, or a"
                + " LockBackend bean), with the election declared under"
                + " nolock.leader.elections.<name>");
      }
    }
  }

  private boolean present(String type) {
    try {
      Class<?> runner = Class.forName(type, false, beanFactory.getBeanClassLoader());
      return beanFactory.getBeanNamesForType(runner, true, false).length > 0;
    } catch (ClassNotFoundException | LinkageError e) {
      return false;
    }
  }

  private static IllegalStateException inactive(String what, String needs) {
    return new IllegalStateException(
        what
            + ": nolock's auto-configuration for it did not run, so it would never run, or run"
            + " unprotected. It needs "
            + needs
            + "; start with --debug to see which condition failed.");
  }
}
