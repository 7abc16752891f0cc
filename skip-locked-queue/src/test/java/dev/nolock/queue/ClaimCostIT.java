package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.sql.SqlNames;
import dev.nolock.queue.internal.JobsTable;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.sql.Connection;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Claim cost does not grow with finished jobs: measured as the shared buffers the claim touches
 * ({@code EXPLAIN (ANALYZE, BUFFERS)}, run in a transaction that is rolled back), never as time.
 * The control runs the same claim on a table whose index has the same columns but no {@code WHERE
 * state = 'ready'}: there the cost grows with the finished jobs, so the measurement can tell the
 * two apart.
 */
@ExtendWith(PostgresExtension.class)
class ClaimCostIT {

  private static final String QUEUE = "cost";
  private static final int READY = 200;
  private static final int CLAIM = 50;
  private static final int FEW_FINISHED = 1_000;
  private static final int MANY_FINISHED = 100_000;

  private static final Pattern HIT = Pattern.compile("\"Shared Hit Blocks\": (\\d+)");
  private static final Pattern READ = Pattern.compile("\"Shared Read Blocks\": (\\d+)");

  /** Blocks touched by the whole claim statement, and by its locking select (the CTE) alone. */
  record Cost(long statementBlocks, long cteBlocks, long cteRows) {}

  @Test
  void claimCostStaysFlatAsFinishedJobsGrowFromAThousandToAHundredThousand(PostgresSchema schema)
      throws Exception {
    String partial = "claim_cost_jobs";
    String control = "claim_cost_control";
    setUp(schema, partial);
    setUp(schema, control);
    // The control: the same columns indexed without the partial predicate.
    schema.dsl().execute("DROP INDEX " + control + "_ready_idx");
    schema
        .dsl()
        .execute("CREATE INDEX " + control + "_all_idx ON " + control + " (queue, run_at, id)");

    addFinished(schema, partial, FEW_FINISHED);
    addFinished(schema, control, FEW_FINISHED);
    Cost partialFew = measure(schema, partial);
    Cost controlFew = measure(schema, control);

    addFinished(schema, partial, MANY_FINISHED - FEW_FINISHED);
    addFinished(schema, control, MANY_FINISHED - FEW_FINISHED);
    Cost partialMany = measure(schema, partial);
    Cost controlMany = measure(schema, control);

    System.out.printf(
        "claim of %d among %d ready jobs, shared buffers hit+read (statement / locking CTE,"
            + " CTE rows examined):%n"
            + "  partial index, %,7d finished: %5d / %5d, %d rows%n"
            + "  partial index, %,7d finished: %5d / %5d, %d rows%n"
            + "  control index, %,7d finished: %5d / %5d, %d rows%n"
            + "  control index, %,7d finished: %5d / %5d, %d rows%n",
        CLAIM,
        READY,
        FEW_FINISHED,
        partialFew.statementBlocks(),
        partialFew.cteBlocks(),
        partialFew.cteRows(),
        MANY_FINISHED,
        partialMany.statementBlocks(),
        partialMany.cteBlocks(),
        partialMany.cteRows(),
        FEW_FINISHED,
        controlFew.statementBlocks(),
        controlFew.cteBlocks(),
        controlFew.cteRows(),
        MANY_FINISHED,
        controlMany.statementBlocks(),
        controlMany.cteBlocks(),
        controlMany.cteRows());

    assertThat(partialMany.cteBlocks())
        .as("the locking select never sees finished jobs")
        .isLessThanOrEqualTo(partialFew.cteBlocks() + 10);
    // Not "the same rows as with few": the planner may read the 200 ready jobs and sort them, or
    // walk the index in order and stop at 50; either way no finished job is examined.
    assertThat(List.of(partialFew.cteRows(), partialMany.cteRows()))
        .as("rows the locking select examines: only ready jobs, never a finished one")
        .allMatch(rows -> rows <= READY);
    assertThat(controlMany.cteRows())
        .as("the control examines the finished jobs too, so the count can see them")
        .isGreaterThan(MANY_FINISHED);
    assertThat(partialMany.statementBlocks())
        .as("the whole claim grows at most by a B-tree level of the primary key per row")
        .isLessThanOrEqualTo(partialFew.statementBlocks() * 3 / 2);
    assertThat(controlMany.cteBlocks())
        .as("the control shows the growth the partial index avoids")
        .isGreaterThan(controlFew.cteBlocks() * 10);
  }

  private static void setUp(PostgresSchema schema, String table) {
    JobQueue<String> q =
        JobQueue.create(
            schema.dataSource(),
            QueueConfig.custom(QUEUE).table(table).notifyOnEnqueue(false).build(),
            PayloadCodec.utf8());
    q.createTableIfMissing();
    List<NewJob<String>> jobs = new ArrayList<>();
    for (int i = 0; i < READY; i++) {
      jobs.add(NewJob.of("ready-" + i));
    }
    q.enqueueAll(jobs);
  }

  /** Finished jobs in bulk, due before every ready job (the worst case for a plain index). */
  private static void addFinished(PostgresSchema schema, String table, int count) {
    schema
        .dsl()
        .execute(
            "INSERT INTO "
                + table
                + " (queue, state, attempt, failures, max_attempts, run_at,"
                + " payload, enqueued_at, finished_at)"
                + " SELECT ?, 'done', 1, 0, 10, clock_timestamp() - interval '1 day' + g *"
                + " interval '1 millisecond', '\\x00'::bytea, clock_timestamp(), clock_timestamp()"
                + " FROM generate_series(1, ?) g",
            QUEUE,
            count);
    schema.dsl().execute("VACUUM ANALYZE " + table);
  }

  /** The smallest of three measurements (each rolled back), to leave cache warm-up out. */
  private static Cost measure(PostgresSchema schema, String table) throws Exception {
    JobsTable jobs = new JobsTable(SqlNames.requireSqlIdentifier("table", table));
    Cost best = null;
    for (int i = 0; i < 3; i++) {
      try (Connection connection = schema.dataSource().getConnection()) {
        connection.setAutoCommit(false);
        DSLContext dsl = DSL.using(connection, SQLDialect.POSTGRES);
        String claim = dsl.renderInlined(jobs.claim(dsl, QUEUE, CLAIM, Duration.ofSeconds(30)));
        String plan = dsl.fetchValue("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + claim).toString();
        connection.rollback();
        Cost cost = parse(plan);
        if (best == null || cost.statementBlocks() < best.statementBlocks()) {
          best = cost;
        }
      }
    }
    return best;
  }

  private static Cost parse(String plan) {
    int cte = plan.indexOf("\"Subplan Name\": \"CTE c\"");
    assertThat(cte).as("the plan has the materialized CTE:%n%s", plan).isPositive();
    String ctePart = plan.substring(cte);
    // The first scan under the CTE reads the jobs table: rows it returned plus rows its filter
    // threw away are the rows the claim examined.
    Matcher scan =
        Pattern.compile(
                "\"Node Type\": \"(?:Index Scan|Index Only Scan|Seq Scan|Bitmap Heap Scan)\""
                    + "([^}]*)")
            .matcher(ctePart);
    assertThat(scan.find()).as("a scan under the CTE:%n%s", plan).isTrue();
    String node = scan.group(1);
    long examined = number(node, "Actual Rows") + number(node, "Rows Removed by Filter");
    return new Cost(blocks(plan), blocks(ctePart), examined);
  }

  private static long number(String node, String key) {
    Matcher m = Pattern.compile("\"" + key + "\": (\\d+)").matcher(node);
    return m.find() ? Long.parseLong(m.group(1)) : 0;
  }

  /** Hit + read of the first plan node in {@code json}. */
  private static long blocks(String json) {
    Matcher hit = HIT.matcher(json);
    Matcher read = READ.matcher(json);
    assertThat(hit.find() && read.find()).isTrue();
    return Long.parseLong(hit.group(1)) + Long.parseLong(read.group(1));
  }
}
