package dev.nolock.spring.ownership;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.ownership.PartitionOwner;
import dev.nolock.patterns.FencingToken;
import dev.nolock.spring.PartitionHandler;
import dev.nolock.spring.PartitionOwners;
import dev.nolock.spring.autoconfigure.NolockOwnershipAutoConfiguration;
import java.util.Set;
import javax.sql.DataSource;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.jdbc.datasource.DriverManagerDataSource;

/**
 * When the partition owners appear, and how bad declarations fail start-up. Nothing here starts an
 * owner (no owner is declared where the context starts), so no server is needed.
 */
class OwnershipConditionsTest {

  private final ApplicationContextRunner runner =
      new ApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(NolockOwnershipAutoConfiguration.class))
          .withPropertyValues("spring.application.name=ledger");

  @Configuration(proxyBeanMethods = false)
  static class WithDataSource {
    @Bean
    DataSource dataSource() {
      return new DriverManagerDataSource("jdbc:postgresql://127.0.0.1:1/never-connected");
    }
  }

  static class Deposits {
    @PartitionHandler("deposits")
    void apply(ConsumerRecord<String, String> record, FencingToken epoch) {}
  }

  static class MoreDeposits {
    @PartitionHandler("deposits")
    void apply(ConsumerRecord<String, byte[]> record) {}
  }

  static class LongKeys {
    @PartitionHandler("deposits")
    void apply(ConsumerRecord<Long, String> record) {}
  }

  static class ExtraParameter {
    @PartitionHandler("deposits")
    void apply(ConsumerRecord<String, String> record, String what) {}
  }

  private static final String[] DECLARED = {
    "nolock.ownership.owners.deposits.topic=deposits",
    "nolock.ownership.owners.deposits.bootstrap-servers=127.0.0.1:1"
  };

  @Test
  void withoutADataSourceThereAreNoOwners() {
    runner.run(context -> assertThat(context).doesNotHaveBean(PartitionOwners.class));
  }

  @Test
  void withADataSourceAndNothingDeclaredTheOwnersBeanIsEmpty() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context.getBean(PartitionOwners.class).names()).isEmpty();
            });
  }

  @Test
  void aHandlerForAnUndeclaredOwnerFailsStartUpNamingTheBeanAndMethod() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withBean("deposits", Deposits.class)
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("@PartitionHandler on bean 'deposits', method")
                    .hasStackTraceContaining("Deposits.apply")
                    .hasStackTraceContaining("set nolock.ownership.owners.deposits.topic"));
  }

  @Test
  void aDeclaredOwnerWithoutAHandlerFailsStartUpNamingTheOwner() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withPropertyValues(DECLARED)
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining(
                        "nolock.ownership.owners.deposits is declared but no bean"));
  }

  @Test
  void twoHandlersForOneOwnerFailStartUpNamingBoth() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withPropertyValues(DECLARED)
        .withBean("deposits", Deposits.class)
        .withBean("moreDeposits", MoreDeposits.class)
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("has a handler already")
                    .hasStackTraceContaining("bean 'deposits'")
                    .hasStackTraceContaining("bean 'moreDeposits'"));
  }

  @Test
  void aKeyTypeWithoutADeserializerFailsStartUpNamingTheMethod() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withPropertyValues(DECLARED)
        .withBean("longKeys", LongKeys.class)
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("LongKeys.apply")
                    .hasStackTraceContaining("key type must be String or byte[]")
                    .hasStackTraceContaining("java.lang.Long"));
  }

  @Test
  void anotherParameterFailsStartUpNamingTheMethod() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withPropertyValues(DECLARED)
        .withBean("extra", ExtraParameter.class)
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("ExtraParameter.apply")
                    .hasStackTraceContaining("takes (ConsumerRecord<K, V>)"));
  }

  @Test
  void aMissingTopicFailsStartUpNamingTheProperty() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withPropertyValues("nolock.ownership.owners.deposits.bootstrap-servers=127.0.0.1:1")
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("nolock.ownership.owners.deposits.topic: required"));
  }

  @Test
  void aValueTheBuilderRefusesFailsStartUpNamingTheProperty() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withPropertyValues(DECLARED)
        .withPropertyValues("nolock.ownership.owners.deposits.max-poll-records=0")
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining(
                        "nolock.ownership.owners.deposits.max-poll-records: maxPollRecords must"
                            + " be"));
  }

  @Test
  void withoutBootstrapServersStartUpFailsNamingBothProperties() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withPropertyValues("nolock.ownership.owners.deposits.topic=deposits")
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("nolock.ownership.owners.deposits.bootstrap-servers")
                    .hasStackTraceContaining("spring.kafka.bootstrap-servers"));
  }

  @Test
  void springKafkasBootstrapServersAreTheDefault() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withPropertyValues(
            "nolock.ownership.owners.deposits.topic=deposits",
            "spring.kafka.bootstrap-servers=127.0.0.1:1")
        .run(
            context ->
                // Past the configuration: the failure is the missing handler, not the servers.
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining(
                        "nolock.ownership.owners.deposits is declared but no bean"));
  }

  @Test
  void withoutAGroupIdOrAnApplicationNameStartUpFailsNamingBoth() {
    new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(NolockOwnershipAutoConfiguration.class))
        .withUserConfiguration(WithDataSource.class)
        .withPropertyValues(DECLARED)
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("nolock.ownership.owners.deposits.group-id: not set")
                    .hasStackTraceContaining("spring.application.name"));
  }

  @Test
  void springKafkasBootstrapServersAsAYamlListAreTheDefaultToo() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withPropertyValues(
            "nolock.ownership.owners.deposits.topic=deposits",
            "spring.kafka.bootstrap-servers[0]=127.0.0.1:1",
            "spring.kafka.bootstrap-servers[1]=127.0.0.1:2")
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining(
                        "nolock.ownership.owners.deposits is declared but no bean"));
  }

  @Test
  void aTransactionalHandlerFailsStartUpNamingTheMethod() {
    runner
        .withUserConfiguration(WithDataSource.class)
        .withPropertyValues(DECLARED)
        .withBean("transactional", TransactionalDeposits.class)
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("TransactionalDeposits.apply")
                    .hasStackTraceContaining("it is @Transactional"));
  }

  @org.springframework.transaction.annotation.Transactional
  static class TransactionalDeposits {
    @PartitionHandler("deposits")
    void apply(ConsumerRecord<String, String> record) {}
  }

  @Test
  void theApplicationsOwnPartitionOwnersWins() {
    PartitionOwners own =
        new PartitionOwners() {
          @Override
          public Set<String> names() {
            return Set.of();
          }

          @Override
          public PartitionOwner<?, ?> owner(String name) {
            throw new IllegalArgumentException(name);
          }
        };
    runner
        .withUserConfiguration(WithDataSource.class)
        .withBean(PartitionOwners.class, () -> own)
        .withPropertyValues(DECLARED)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(context.getBean(PartitionOwners.class)).isSameAs(own);
            });
  }
}
