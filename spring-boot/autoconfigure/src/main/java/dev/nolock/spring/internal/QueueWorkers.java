package dev.nolock.spring.internal;

import dev.nolock.queue.Completion;
import dev.nolock.queue.Job;
import dev.nolock.queue.JobQueue;
import dev.nolock.queue.WorkerConfig;
import dev.nolock.queue.WorkerPool;
import dev.nolock.spring.JobHandler;
import dev.nolock.spring.JobQueues;
import java.lang.reflect.Method;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.function.Function;
import org.springframework.aop.scope.ScopedProxyUtils;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.context.SmartLifecycle;
import org.springframework.core.ResolvableType;

/**
 * Finds the {@link JobHandler} beans and methods and runs one {@link WorkerPool} per queue that has
 * one.
 *
 * <ol>
 *   <li>Once every singleton exists, each bean's class is searched for {@code @JobHandler} methods,
 *       and each bean (its class or {@code @Bean} method) for a {@code @JobHandler} on a {@code
 *       dev.nolock.queue.JobHandler}; each becomes a handler of its queue with the payload type of
 *       its signature. A bad signature, an unresolvable type, a second handler for a queue or a
 *       queue that cannot be made fails start-up, naming the bean and method.
 *   <li>{@link #start()} (after the refresh) starts the pools, with {@code
 *       nolock.queue.queues.<name>.*}.
 *   <li>{@link #stop()} closes them: no new claims, running handlers get their shutdown timeout,
 *       the rest is handed back.
 * </ol>
 */
public final class QueueWorkers
    implements SmartInitializingSingleton, SmartLifecycle, BeanFactoryAware {

  /**
   * Spring stops higher phases first. Web servers stop taking requests at {@code DEFAULT_PHASE -
   * 1024} (graceful shutdown) and stop at {@code DEFAULT_PHASE - 2048}; the pools stop between the
   * two, so jobs the last requests enqueued are still claimed and finished before the pools close,
   * while the {@code DataSource} is still open (it closes on destroy, after every stop).
   */
  public static final int PHASE = SmartLifecycle.DEFAULT_PHASE - 1536;

  private record Registration<T>(
      String source, JobQueue<T> queue, dev.nolock.queue.JobHandler<T> handler) {}

  private final JobQueues jobQueues;
  private final Function<String, WorkerConfig> workerConfigs;
  private final Map<String, Registration<?>> registrations = new LinkedHashMap<>();
  private final Map<String, WorkerPool<?>> pools = new ConcurrentHashMap<>();
  private ConfigurableListableBeanFactory beanFactory;
  private volatile boolean running;

  public QueueWorkers(JobQueues jobQueues, Function<String, WorkerConfig> workerConfigs) {
    this.jobQueues = jobQueues;
    this.workerConfigs = workerConfigs;
  }

  @Override
  public void setBeanFactory(BeanFactory beanFactory) {
    this.beanFactory = (ConfigurableListableBeanFactory) beanFactory;
  }

  @Override
  public void afterSingletonsInstantiated() {
    for (String name : beanFactory.getBeanDefinitionNames()) {
      Class<?> type = ScopedProxyUtils.isScopedTarget(name) ? null : beanFactory.getType(name);
      if (type == null) {
        continue;
      }
      JobHandler named = beanFactory.findAnnotationOnBean(name, JobHandler.class);
      if (named != null) {
        if (!dev.nolock.queue.JobHandler.class.isAssignableFrom(type)) {
          throw refused(
              "bean '" + name + "'",
              "on a class, @JobHandler needs the class to implement dev.nolock.queue.JobHandler<T>;"
                  + " put it on a method instead, or implement the interface.");
        }
        registerBean(name, named.value());
      }
    }
    AnnotatedMethods.forEach(
        beanFactory,
        JobHandler.class,
        (name, method, annotation) -> registerMethod(name, method, annotation.value()));
  }

  private void registerBean(String beanName, String queueName) {
    String source = "bean '" + beanName + "'";
    Class<?> payload =
        beanFactory
            .getMergedBeanDefinition(beanName)
            .getResolvableType()
            .as(dev.nolock.queue.JobHandler.class)
            .getGeneric(0)
            .resolve();
    if (payload == null) {
      throw refused(
          source,
          "its payload type T of dev.nolock.queue.JobHandler<T> cannot be resolved: declare the"
              + " class (or the @Bean method's return type) with a concrete T, e.g."
              + " JobHandler<Receipt>.");
    }
    @SuppressWarnings({"unchecked", "rawtypes"}) // T resolved as payload just above
    dev.nolock.queue.JobHandler<Object> handler =
        (dev.nolock.queue.JobHandler) beanFactory.getBean(beanName);
    register(source, queueName, payload, handler);
  }

  private void registerMethod(String beanName, Method method, String queueName) {
    String source = "bean '" + beanName + "', method " + method.toGenericString();
    if (method.getParameterCount() != 1) {
      throw refused(
          source,
          "a @JobHandler method takes one parameter, the payload T or dev.nolock.queue.Job<T>;"
              + " it has "
              + method.getParameterCount()
              + ".");
    }
    if (method.getReturnType() != void.class && method.getReturnType() != Completion.class) {
      throw refused(
          source,
          "a @JobHandler method returns dev.nolock.queue.Completion or void (void completes the"
              + " job); it returns "
              + method.getReturnType().getName()
              + ".");
    }
    ResolvableType parameter = ResolvableType.forMethodParameter(method, 0);
    boolean wantsJob = parameter.toClass() == Job.class;
    Class<?> payload = wantsJob ? parameter.getGeneric(0).resolve() : parameter.resolve();
    if (payload == null || payload == Object.class) {
      throw refused(
          source,
          "its payload type cannot be resolved: declare the parameter with a concrete type, e.g."
              + " Receipt or Job<Receipt>.");
    }
    AnnotatedMethods.Call call = AnnotatedMethods.call(beanFactory, beanName, method);
    boolean returnsVoid = method.getReturnType() == void.class;
    dev.nolock.queue.JobHandler<Object> handler =
        job -> {
          Object result = call.invoke(wantsJob ? job : job.payload());
          return returnsVoid ? Completion.complete() : (Completion) result;
        };
    register(source, queueName, payload, handler);
  }

  @SuppressWarnings({"unchecked", "rawtypes"}) // the handler's type is the queue's payload type
  private void register(
      String source, String queueName, Class<?> payload, dev.nolock.queue.JobHandler handler) {
    Registration<?> earlier = registrations.get(queueName);
    if (earlier != null) {
      throw refused(
          source,
          "the queue \""
              + queueName
              + "\" has a handler already ("
              + earlier.source()
              + "): one handler per queue; give one of them another queue.");
    }
    JobQueue queue;
    try {
      queue = jobQueues.queue(queueName, payload);
      workerConfigs.apply(queueName);
    } catch (IllegalArgumentException e) {
      throw refused(source, e.getMessage());
    }
    registrations.put(queueName, new Registration<>(source, queue, handler));
  }

  private static IllegalStateException refused(String source, String why) {
    return new IllegalStateException("@JobHandler on " + source + ": " + why);
  }

  /** The queues that have a handler, by name, in the order they were found. */
  public Map<String, JobQueue<?>> queues() {
    Map<String, JobQueue<?>> queues = new LinkedHashMap<>();
    registrations.forEach((name, r) -> queues.put(name, r.queue()));
    return queues;
  }

  /** Whether the queue's worker pool was started and is still running. */
  public boolean isRunning(String queue) {
    WorkerPool<?> pool = pools.get(queue);
    return pool != null && pool.isRunning();
  }

  @Override
  public void start() {
    try {
      for (Map.Entry<String, Registration<?>> e : registrations.entrySet()) {
        pools.put(e.getKey(), startPool(e.getValue(), workerConfigs.apply(e.getKey())));
      }
    } catch (RuntimeException e) {
      closePools();
      throw e;
    }
    running = true;
  }

  private static <T> WorkerPool<T> startPool(Registration<T> r, WorkerConfig config) {
    return WorkerPool.start(r.queue(), config, r.handler());
  }

  @Override
  public void stop() {
    closePools();
    running = false;
  }

  private void closePools() {
    // Closed one after the other: each close waits at most its own shutdown timeout.
    List<WorkerPool<?>> closing = List.copyOf(pools.values());
    pools.clear();
    CloseAll.each(closing, WorkerPool::close);
  }

  @Override
  public boolean isRunning() {
    return running;
  }

  @Override
  public int getPhase() {
    return PHASE;
  }
}
