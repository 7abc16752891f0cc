package dev.nolock.spring.internal;

import dev.nolock.ownership.OwnershipConfig;
import dev.nolock.ownership.PartitionOwner;
import dev.nolock.ownership.RecordHandler;
import dev.nolock.patterns.FencingToken;
import dev.nolock.spring.PartitionHandler;
import dev.nolock.spring.PartitionOwners;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.BeanFactoryAware;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.context.SmartLifecycle;
import org.springframework.core.ResolvableType;

/**
 * Finds the {@link PartitionHandler} methods and runs one {@link PartitionOwner} per declared
 * owner.
 *
 * <ol>
 *   <li>Once every singleton exists, each bean's class is searched for {@code @PartitionHandler}
 *       methods. An undeclared owner, a second method for an owner, or a signature that does not
 *       fit fails start-up naming the bean and method; a declared owner without a method fails it
 *       naming the owner (its records would pile up unread).
 *   <li>Each method becomes a {@link RecordHandler} that calls it with the apply transaction bound
 *       as the thread's Spring transaction ({@link BoundTransactions}), so the method's Spring data
 *       access is fenced by the owner epoch like the library's own {@code tx}.
 *   <li>{@link #start()} (after the refresh) creates the tables when asked and starts the owners;
 *       {@link #stop()} closes them (each waits for its running apply, at most its close timeout).
 * </ol>
 */
public final class Ownerships
    implements PartitionOwners, SmartInitializingSingleton, SmartLifecycle, BeanFactoryAware {

  private record Registration(
      String source,
      Deserializer<?> keys,
      Deserializer<?> values,
      RecordHandler<Object, Object> handler) {}

  private final DataSource dataSource;
  private final Map<String, OwnershipConfig> configs;
  private final boolean createTables;
  private final Map<String, Registration> registrations = new LinkedHashMap<>();
  // Read by health checks and the endpoint on other threads.
  private final Map<String, PartitionOwner<?, ?>> owners = new ConcurrentHashMap<>();
  private ConfigurableListableBeanFactory beanFactory;
  private volatile boolean running;

  /**
   * @param dataSource the application's {@code DataSource} (nolock's own connections are taken from
   *     it without transaction-aware proxies)
   * @param configs each declared owner's checked configuration, by name
   */
  public Ownerships(
      DataSource dataSource, Map<String, OwnershipConfig> configs, boolean createTables) {
    this.dataSource = dataSource;
    this.configs = Collections.unmodifiableMap(new LinkedHashMap<>(configs));
    this.createTables = createTables;
  }

  @Override
  public void setBeanFactory(BeanFactory beanFactory) {
    this.beanFactory = (ConfigurableListableBeanFactory) beanFactory;
  }

  @Override
  public void afterSingletonsInstantiated() {
    AnnotatedMethods.forEach(
        beanFactory,
        PartitionHandler.class,
        (name, method, annotation) -> register(name, method, annotation.value()));
    for (String owner : configs.keySet()) {
      if (!registrations.containsKey(owner)) {
        throw new IllegalStateException(
            "nolock.ownership.owners."
                + owner
                + " is declared but no bean has a @PartitionHandler(\""
                + owner
                + "\") method: add one, or remove the owner's properties.");
      }
    }
  }

  private void register(String beanName, Method method, String owner) {
    String source = "bean '" + beanName + "', method " + method.toGenericString();
    if (!configs.containsKey(owner)) {
      throw refused(
          source,
          "no owner \""
              + owner
              + "\" is declared: set nolock.ownership.owners."
              + owner
              + ".topic (declared: "
              + configs.keySet()
              + ").");
    }
    Registration earlier = registrations.get(owner);
    if (earlier != null) {
      throw refused(
          source, "the owner \"" + owner + "\" has a handler already (" + earlier.source() + ").");
    }
    if (Modifier.isPrivate(method.getModifiers())) {
      throw refused(
          source,
          "it is private: a proxy of the bean (@Transactional elsewhere on it, @Validated, ...)"
              + " would run it on the proxy, without the bean's state; make it package-private or"
              + " public.");
    }
    if (AnnotatedMethods.isTransactional(method)) {
      throw refused(
          source,
          "it is @Transactional (on the method or its class): it already runs in the record's"
              + " apply transaction, where the owner epoch is checked, and a propagation other"
              + " than the default would commit its writes apart from that check. Remove"
              + " @Transactional.");
    }
    Class<?>[] parameters = method.getParameterTypes();
    boolean wantsEpoch = parameters.length == 2 && parameters[1] == FencingToken.class;
    if (parameters.length < 1
        || parameters.length > 2
        || parameters[0] != ConsumerRecord.class
        || (parameters.length == 2 && !wantsEpoch)) {
      throw refused(
          source,
          "a @PartitionHandler method takes (ConsumerRecord<K, V>) or (ConsumerRecord<K, V>,"
              + " FencingToken).");
    }
    ResolvableType record = ResolvableType.forMethodParameter(method, 0);
    Deserializer<?> keys = deserializer(source, "key", record.getGeneric(0).resolve());
    Deserializer<?> values = deserializer(source, "value", record.getGeneric(1).resolve());
    AnnotatedMethods.Call call = AnnotatedMethods.call(beanFactory, beanName, method);
    RecordHandler<Object, Object> handler =
        (consumed, tx, epoch) ->
            BoundTransactions.call(
                dataSource,
                tx,
                () -> wantsEpoch ? call.invoke(consumed, epoch) : call.invoke(consumed));
    registrations.put(owner, new Registration(source, keys, values, handler));
  }

  private static Deserializer<?> deserializer(String source, String part, Class<?> type) {
    if (type == String.class) {
      return new StringDeserializer();
    }
    if (type == byte[].class) {
      return new ByteArrayDeserializer();
    }
    throw refused(
        source,
        "the record's "
            + part
            + " type must be String or byte[] (declare ConsumerRecord<String, String>, or"
            + " byte[] and decode it yourself); it is "
            + (type == null ? "unresolved" : type.getName())
            + ".");
  }

  private static IllegalStateException refused(String source, String why) {
    return new IllegalStateException("@PartitionHandler on " + source + ": " + why);
  }

  @Override
  public Set<String> names() {
    return configs.keySet();
  }

  @Override
  public PartitionOwner<?, ?> owner(String name) {
    PartitionOwner<?, ?> owner = owners.get(name);
    if (owner == null) {
      throw new IllegalArgumentException(
          "No running partition owner \"" + name + "\"; declared: " + configs.keySet());
    }
    return owner;
  }

  @Override
  public void start() {
    List<PartitionOwner<?, ?>> created = new ArrayList<>();
    try {
      for (Map.Entry<String, Registration> e : registrations.entrySet()) {
        PartitionOwner<?, ?> owner = create(e.getValue(), configs.get(e.getKey()));
        // Its Kafka consumer exists from here on: closed on failure even if never started.
        created.add(owner);
        if (createTables) {
          owner.createTableIfMissing();
        }
        owner.start();
        owners.put(e.getKey(), owner);
      }
    } catch (RuntimeException e) {
      owners.clear();
      CloseAll.each(created, PartitionOwner::close);
      throw e;
    }
    running = true;
  }

  @SuppressWarnings("unchecked") // the deserializers were chosen from the handler's signature
  private PartitionOwner<?, ?> create(Registration r, OwnershipConfig config) {
    return PartitionOwner.create(
        OwnConnections.of(dataSource),
        config,
        (Deserializer<Object>) r.keys(),
        (Deserializer<Object>) r.values(),
        r.handler());
  }

  @Override
  public void stop() {
    // One after the other: each close waits at most its own close timeout.
    List<PartitionOwner<?, ?>> closing = List.copyOf(owners.values());
    owners.clear();
    running = false;
    CloseAll.each(closing, PartitionOwner::close);
  }

  @Override
  public boolean isRunning() {
    return running;
  }

  @Override
  public int getPhase() {
    return NolockPhase.PHASE;
  }
}
