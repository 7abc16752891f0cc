package dev.nolock.ownership;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.zaxxer.hikari.HikariConfig;
import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.patterns.BackendUnavailableException;
import dev.nolock.patterns.SchemaMismatchException;
import dev.nolock.testkit.KafkaBroker;
import dev.nolock.testkit.KafkaExtension;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.List;
import java.util.UUID;
import java.util.function.Consumer;
import javax.sql.DataSource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith({KafkaExtension.class, PostgresExtension.class})
class SchemaIT {

  /**
   * An ownership table that exists without a column the runner reads or writes is refused by {@code
   * createTableIfMissing()} with the DDL that fits. Before, the call succeeded (CREATE TABLE IF NOT
   * EXISTS left the table as it was) and the runner failed later, at start.
   */
  @Test
  void aTableWithoutAColumnTheRunnerNeedsIsRefusedWithTheDdlThatFits(PostgresSchema pg) {
    pg.dsl()
        .execute(
            "CREATE TABLE short_owners (consumer_group varchar(255) NOT NULL,"
                + " topic varchar(249) NOT NULL, partition int NOT NULL,"
                + " epoch bigint NOT NULL, owner varchar(255),"
                + " PRIMARY KEY (consumer_group, topic, partition))");
    OwnershipConfig config =
        OwnershipConfig.custom("127.0.0.1:9", "orders", "schema-it").table("short_owners").build();
    try (PartitionOwner<String, String> owner =
        PartitionOwner.create(
            pg.dataSource(),
            config,
            new StringDeserializer(),
            new StringDeserializer(),
            (record, tx, epoch) -> {})) {
      assertThatThrownBy(owner::createTableIfMissing)
          .isInstanceOfSatisfying(
              SchemaMismatchException.class,
              e -> {
                assertThat(e.table()).isEqualTo("short_owners");
                assertThat(e.problem())
                    .contains("column partition_count is missing")
                    .contains("column last_applied_offset is missing");
                assertThat(String.join("\n", e.ddl()))
                    .contains("CREATE TABLE IF NOT EXISTS")
                    .contains("last_applied_offset");
              });
    }
  }

  /** Every column of the README's table; {@code %s} is the type of {@code claimed_at}. */
  private static final String COLUMNS =
      "consumer_group varchar(255) NOT NULL, topic varchar(249) NOT NULL,"
          + " partition int NOT NULL, partition_count int NOT NULL, epoch bigint NOT NULL,"
          + " owner varchar(255), last_applied_offset bigint NOT NULL, claimed_at %s";

  /**
   * An ownership table without its primary key on {@code (consumer_group, topic, partition)}, or
   * with one on other columns, is refused: without it {@code register}'s insert adds the rows again
   * at every start, and the claim then matches several rows. Before, the call accepted both.
   */
  @Test
  void aTableWithoutItsPrimaryKeyOrWithAnotherOneIsRefused(PostgresSchema pg) {
    pg.dsl().execute("CREATE TABLE keyless_owners (" + COLUMNS.formatted("timestamptz") + ")");
    pg.dsl()
        .execute(
            "CREATE TABLE topic_keyed_owners ("
                + COLUMNS.formatted("timestamptz")
                + ", PRIMARY KEY (consumer_group, topic))");

    for (String table : List.of("keyless_owners", "topic_keyed_owners")) {
      withOwner(
          pg.dataSource(),
          table,
          owner ->
              assertThatThrownBy(owner::createTableIfMissing)
                  .as(table)
                  .isInstanceOfSatisfying(
                      SchemaMismatchException.class,
                      e -> {
                        assertThat(e.table()).isEqualTo(table);
                        assertThat(e.problem())
                            .startsWith("no unique key on (consumer_group, topic, partition)");
                        assertThat(String.join("\n", e.ddl()))
                            .contains("PRIMARY KEY (consumer_group, topic, partition)");
                      }));
    }
  }

  /**
   * Columns of a type the runner cannot use are refused: a {@code timestamp} without time zone, an
   * epoch that is {@code int} (the fencing token must not wrap), a group name narrower than the 255
   * characters a group id may have. Before, the call checked the column names only.
   */
  @Test
  void columnsOfAnotherTypeAreRefused(PostgresSchema pg) {
    pg.dsl()
        .execute(
            "CREATE TABLE odd_owners (consumer_group varchar(40) NOT NULL,"
                + " topic varchar(249) NOT NULL, partition int NOT NULL,"
                + " partition_count int NOT NULL, epoch int NOT NULL, owner varchar(255),"
                + " last_applied_offset bigint NOT NULL, claimed_at timestamp,"
                + " PRIMARY KEY (consumer_group, topic, partition))");

    withOwner(
        pg.dataSource(),
        "odd_owners",
        owner ->
            assertThatThrownBy(owner::createTableIfMissing)
                .isInstanceOfSatisfying(
                    SchemaMismatchException.class,
                    e ->
                        assertThat(e.problem())
                            .contains(
                                "column consumer_group is character varying(40), not text or"
                                    + " character varying(255) or wider")
                            .contains("column epoch is integer, not bigint")
                            .contains(
                                "column claimed_at is timestamp without time zone, not"
                                    + " timestamp with time zone")));
  }

  /** The table the call creates (and the README's, the same DDL) is accepted when called again. */
  @Test
  void theTableItCreatesIsAcceptedWhenCalledAgain(PostgresSchema pg) {
    withOwner(
        pg.dataSource(),
        pg.schemaName() + ".fresh_owners",
        owner -> {
          owner.createTableIfMissing();
          owner.createTableIfMissing();
        });
  }

  /**
   * A missing privilege (SQLState 42501: the role may not create tables in the schema) is not a
   * backend outage: a retry repeats it. Before, every failure of the call was a retryable {@link
   * BackendUnavailableException}.
   */
  @Test
  void aMissingPrivilegeIsNotReportedAsRetryable(PostgresSchema pg) {
    String role = "nolock_owner_reader_" + UUID.randomUUID().toString().replace("-", "");
    pg.dsl().execute("CREATE ROLE " + role + " NOLOGIN");
    try {
      pg.dsl().execute("GRANT USAGE ON SCHEMA " + pg.schemaName() + " TO " + role);
      HikariConfig config = new HikariConfig();
      config.setJdbcUrl(pg.jdbcUrl());
      config.setMaximumPoolSize(1);
      config.setMinimumIdle(0);
      config.setConnectionInitSql("SET ROLE " + role);
      try (HikariDataSource asRole = new HikariDataSource(config)) {
        withOwner(
            asRole,
            "forbidden_owners",
            owner ->
                assertThatThrownBy(owner::createTableIfMissing)
                    .isInstanceOf(IllegalStateException.class)
                    .isNotInstanceOf(BackendUnavailableException.class)
                    .hasMessageContaining("42501")
                    .hasMessageContaining("forbidden_owners"));
      }
    } finally {
      pg.dsl().execute("DROP OWNED BY " + role);
      pg.dsl().execute("DROP ROLE " + role);
    }
  }

  /**
   * A runner started on a keyless table it did not create (the schema managed by hand, {@code
   * createTableIfMissing()} not called) stops with a fault a retry would repeat, naming SQLState
   * 42P10, and records no row. Before, {@code register}'s {@code ON CONFLICT DO NOTHING} had no
   * target: each start added every partition's row again, and the claims that followed matched
   * several rows.
   */
  @Test
  void aRunnerOnAKeylessTableItDidNotCreateStopsWithoutRecordingRows(
      KafkaBroker kafka, PostgresSchema pg) throws Exception {
    String topic = kafka.createTopic(kafka.uniqueTopicName("keyless"), 2);
    pg.dsl().execute("CREATE TABLE keyless_start (" + COLUMNS.formatted("timestamptz") + ")");

    for (int start = 0; start < 2; start++) {
      try (PartitionOwner<String, String> owner =
          PartitionOwner.create(
              pg.dataSource(),
              TestOwners.config(kafka.bootstrapServers(), topic, "owners-" + topic, "o" + start)
                  .table("keyless_start")
                  .build(),
              new StringDeserializer(),
              new StringDeserializer(),
              (record, tx, epoch) -> {})) {
        owner.start();
        assertThat(owner.awaitTermination(Duration.ofSeconds(60))).isTrue();
        assertThat(owner.failure().toJavaOptional())
            .get()
            .isInstanceOfSatisfying(
                IllegalStateException.class,
                e ->
                    assertThat(e)
                        .isNotInstanceOf(BackendUnavailableException.class)
                        .hasMessageContaining("recording the partition count")
                        .hasMessageContaining("42P10"));
      }
    }
    assertThat(pg.dsl().fetchCount(org.jooq.impl.DSL.table("keyless_start"))).isZero();
  }

  private static void withOwner(
      DataSource dataSource, String table, Consumer<PartitionOwner<String, String>> body) {
    OwnershipConfig config =
        OwnershipConfig.custom("127.0.0.1:9", "orders", "schema-it").table(table).build();
    try (PartitionOwner<String, String> owner =
        PartitionOwner.create(
            dataSource,
            config,
            new StringDeserializer(),
            new StringDeserializer(),
            (record, tx, epoch) -> {})) {
      body.accept(owner);
    }
  }
}
