package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.sql.SqlNames;
import dev.nolock.queue.internal.AdminSql;
import dev.nolock.queue.internal.JobsTable;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.sql.Connection;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The cost of a dead-letter page, read from the plan ({@code EXPLAIN (ANALYZE, BUFFERS)}) of the
 * page query on a table of 100,000 finished jobs and a few dead letters with higher ids: the page
 * reads the dead-letter index and examines only the rows it returns, however many other jobs the
 * queue keeps.
 */
@ExtendWith(PostgresExtension.class)
class DeadLetterPageCostIT {

  private static final String QUEUE = "letters";
  private static final String TABLE = "dead_page_jobs";
  private static final int FINISHED = 100_000;
  private static final int DEAD = 25;
  private static final int PAGE = 10;

  @Test
  void aDeadLetterPageReadsTheDeadLetterIndexAndExaminesOnlyItsRows(PostgresSchema schema)
      throws Exception {
    JobQueue.create(
            schema.dataSource(),
            QueueConfig.custom(QUEUE).table(TABLE).notifyOnEnqueue(false).build(),
            PayloadCodec.utf8())
        .createTableIfMissing();
    insert(schema, "done", FINISHED);
    insert(schema, "dead", DEAD);
    schema.dsl().execute("VACUUM ANALYZE " + TABLE);

    String plan;
    try (Connection connection = schema.dataSource().getConnection()) {
      DSLContext dsl = DSL.using(connection, SQLDialect.POSTGRES);
      AdminSql admin = new AdminSql(new JobsTable(SqlNames.requireSqlIdentifier("table", TABLE)));
      String page = dsl.renderInlined(admin.deadLetters(dsl, QUEUE, 0L, PAGE));
      plan = dsl.fetchValue("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + page).toString();
    }
    System.out.printf(
        "dead-letter page of %d among %,d finished jobs:%n%s%n", PAGE, FINISHED, plan);

    assertThat(plan).as("the scan").contains("\"Index Name\": \"" + TABLE + "_dead_idx\"");
    assertThat(number(plan, "Rows Removed by Filter"))
        .as("rows the page examined and threw away")
        .isZero();
    assertThat(first(plan, "Shared Hit Blocks") + first(plan, "Shared Read Blocks"))
        .as("shared buffers the page touched (its top plan node, planning left out)")
        .isLessThan(20);
  }

  private static void insert(PostgresSchema schema, String state, int count) {
    schema
        .dsl()
        .execute(
            "INSERT INTO "
                + TABLE
                + " (queue, state, attempt, failures, max_attempts, run_at, payload, enqueued_at,"
                + " finished_at) SELECT ?, ?, 1, 1, 1, clock_timestamp(), '\\x00'::bytea,"
                + " clock_timestamp(), clock_timestamp() FROM generate_series(1, ?) g",
            QUEUE,
            state,
            count);
  }

  /** {@code key} of the top plan node, which counts its children's buffers too. */
  private static long first(String plan, String key) {
    Matcher m = Pattern.compile("\"" + key + "\": (\\d+)").matcher(plan);
    assertThat(m.find()).as("%s in the plan", key).isTrue();
    return Long.parseLong(m.group(1));
  }

  /** The sum of {@code key} over every plan node. */
  private static long number(String plan, String key) {
    Matcher m = Pattern.compile("\"" + key + "\": (\\d+)").matcher(plan);
    long sum = 0;
    while (m.find()) {
      sum += Long.parseLong(m.group(1));
    }
    return sum;
  }
}
