package example;

import dev.nolock.ownership.KeyRouter;
import dev.nolock.ownership.OwnershipConfig;
import dev.nolock.ownership.PartitionOwner;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import javax.sql.DataSource;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.Producer;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.postgresql.ds.PGSimpleDataSource;

/** Two appliers share a topic's partitions, then one leaves: every deposit is applied once. */
public final class Main {

  public static void main(String[] args) throws Exception {
    String bootstrap = env("NOLOCK_KAFKA_BOOTSTRAP", "127.0.0.1:9092");
    String url = env("NOLOCK_PG_URL", "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
    String run = UUID.randomUUID().toString().replace("-", "");
    String topic = "account-commands-" + run; // this run's own topic, group and schema
    DataSource pool = freshSchema(url, "nolock_example_" + run); // a pool (HikariCP) in production
    DSLContext dsl = DSL.using(pool, SQLDialect.POSTGRES);
    dsl.execute("CREATE TABLE balances (account text PRIMARY KEY, cents bigint NOT NULL)");
    try (Admin admin = Admin.create(Map.of("bootstrap.servers", bootstrap))) {
      admin.createTopics(List.of(new NewTopic(topic, 12, (short) 1))).all().get();
    }

    // Appliers: one runner per instance; the consumer group spreads the partitions.
    OwnershipConfig config =
        OwnershipConfig.custom(bootstrap, topic, "account-ledger-" + run)
            .sessionTimeout(Duration.ofSeconds(10))
            .build();
    // Producers: each command goes to its key's partition, like the default partitioner.
    KeyRouter<String> router = KeyRouter.create(topic, 12, new StringSerializer());
    try (Producer<String, String> producer =
            new KafkaProducer<>(
                Map.of("bootstrap.servers", bootstrap, "enable.idempotence", true),
                new StringSerializer(),
                new StringSerializer());
        PartitionOwner<String, String> first = applier(pool, config);
        PartitionOwner<String, String> second = applier(pool, config)) {
      first.createTableIfMissing(); // or run the module README's DDL in your migrations
      first.start();
      second.start();
      deposit(router, producer, 100); // 10 deposits of 100 over 5 accounts
      awaitTotal(dsl, 1_000);
      System.out.println(
          "partitions owned: "
              + first.ownedPartitions().keySet()
              + " and "
              + second.ownedPartitions().keySet());

      // The applier that owns more leaves (a deploy, a crash): close() hands its partitions
      // over, and the other applier takes them with a new epoch.
      boolean firstLeaves = first.ownedPartitions().size() >= second.ownedPartitions().size();
      PartitionOwner<String, String> staying = firstLeaves ? second : first;
      (firstLeaves ? first : second).close();
      deposit(router, producer, 10);
      awaitTotal(dsl, 1_100);
      System.out.println("after one left, the other owns " + staying.ownedPartitions().keySet());
      check(staying.failure().isEmpty(), "the applier stopped: " + staying.failure());
    }
    for (int account = 0; account < 5; account++) {
      Long cents =
          (Long)
              dsl.fetchValue("SELECT cents FROM balances WHERE account = ?", "account-" + account);
      check(cents != null && cents == 220, "account-" + account + " holds " + cents + ", not 220");
    }
    dsl.execute("DROP SCHEMA nolock_example_" + run + " CASCADE");
    System.out.println("OK: each of 20 deposits applied once, across a hand-over");
  }

  private static PartitionOwner<String, String> applier(DataSource pool, OwnershipConfig config) {
    return PartitionOwner.create(
        pool,
        config,
        new StringDeserializer(),
        new StringDeserializer(),
        (record, tx, epoch) -> {
          // Runs in the transaction that checked this instance's epoch on the record's
          // partition and advanced its last applied offset: all of it commits, or none.
          long cents = Long.parseLong(record.value().substring("deposit ".length()));
          tx.execute(
              "INSERT INTO balances (account, cents) VALUES (?, ?) ON CONFLICT (account) DO"
                  + " UPDATE SET cents = balances.cents + excluded.cents",
              record.key(),
              cents);
        });
  }

  private static void deposit(
      KeyRouter<String> router, Producer<String, String> producer, long cents) throws Exception {
    for (int i = 0; i < 10; i++) {
      router.send(producer, "account-" + i % 5, "deposit " + cents).get();
    }
  }

  /** Waits until the balances add up to the total: the appliers work in the background. */
  private static void awaitTotal(DSLContext dsl, long total) throws InterruptedException {
    Instant deadline = Instant.now().plusSeconds(60);
    long sum = 0;
    while (Instant.now().isBefore(deadline)) {
      Object value = dsl.fetchValue("SELECT coalesce(sum(cents), 0) FROM balances");
      sum = ((Number) value).longValue();
      if (sum >= total) {
        break;
      }
      // Polling the database: the appliers are other components with no signal to wait on, as
      // an application's own check would be (tests use Awaitility for this).
      Thread.sleep(100);
    }
    System.out.println("balances add up to " + sum);
    check(sum == total, "the balances add up to " + sum + ", not " + total);
  }

  /** A schema of this run's own, so that every run starts from empty tables. */
  private static DataSource freshSchema(String url, String schema) throws SQLException {
    try (Connection connection = DriverManager.getConnection(url)) {
      connection.createStatement().execute("CREATE SCHEMA " + schema);
    }
    PGSimpleDataSource dataSource = new PGSimpleDataSource();
    dataSource.setURL(url);
    dataSource.setCurrentSchema(schema);
    return dataSource;
  }

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isBlank() ? fallback : value;
  }

  private static void check(boolean ok, String failure) {
    if (!ok) {
      System.err.println("FAILED: " + failure);
      System.exit(1);
    }
  }
}
