package dev.nolock.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.sql.SqlNames;
import dev.nolock.queue.QueueConfig;
import dev.nolock.queue.internal.JobsTable;
import java.util.ArrayList;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

/**
 * The queue floors must send what the library sends, or they measure another statement: the claim
 * and the batch completion as jOOQ renders them for the default table, no server needed.
 */
class QueueDrainSqlTest {

  private final DSLContext dsl = DSL.using(SQLDialect.POSTGRES);
  private final JobsTable jobs =
      new JobsTable(SqlNames.requireSqlIdentifier("table", QueueConfig.DEFAULT_TABLE));

  @Test
  void theFloorsClaimIsTheLibrarysClaim() {
    QueueConfig config = QueueConfig.custom(QueueBenchmark.QUEUE).build();

    assertThat(jobs.claim(dsl, QueueBenchmark.QUEUE, 10, config.lease()).getSQL())
        .isEqualTo(QueueBenchmark.CLAIM);
  }

  @Test
  void theDrainFloorsCompletionIsTheLibrarysCompleteAllForEveryBatchSize() {
    for (int n : new int[] {1, 7, QueueDrainHarness.BATCH}) {
      List<long[]> pairs = new ArrayList<>();
      for (int i = 0; i < n; i++) {
        pairs.add(new long[] {i, 1});
      }

      assertThat(jobs.completeAll(dsl, QueueBenchmark.QUEUE, pairs).getSQL())
          .as("%d jobs", n)
          .isEqualTo(QueueDrainHarness.completeAll(n));
    }
  }
}
