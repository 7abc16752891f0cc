package dev.nolock.queue.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.sql.RenderedStatement;
import dev.nolock.patterns.sql.SqlNames;
import java.time.Duration;
import java.time.OffsetDateTime;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.Query;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

/** The statements as PostgreSQL receives them: the shapes the design depends on. */
class JobsTableSqlTest {

  private final DSLContext dsl = DSL.using(SQLDialect.POSTGRES);
  private final JobsTable jobs = new JobsTable(SqlNames.requireSqlIdentifier("t", "app.jobs"));

  @Test
  void claimIsOneUpdateFromAMaterializedSkipLockedCte() {
    String sql = jobs.claim(dsl, "mail", 50, Duration.ofSeconds(30)).getSQL();
    System.out.println(sql);
    assertThat(sql)
        .startsWith("with \"c\" as materialized (select \"id\" from \"app\".\"jobs\"")
        .contains("\"state\" = 'ready'")
        .contains("\"run_at\" <= clock_timestamp()")
        .contains("order by \"run_at\", \"id\"")
        .contains("for update skip locked")
        .contains("update \"app\".\"jobs\" as \"j\" set \"state\" = 'running'")
        .contains("\"attempt\" = (\"j\".\"attempt\" + 1)")
        .contains("from \"c\" where \"j\".\"id\" = \"c\".\"id\"")
        .contains("returning")
        .doesNotContain(" in (select");
  }

  /**
   * The claim and the completion run from text rendered once ({@code RenderedStatement}); each must
   * read, inlined, exactly as the statement built with the same values (a value passed in another
   * place would show here). A lease with a fraction of a millisecond is rounded up in both.
   */
  @Test
  void theClaimAndTheCompletionRenderedOnceReadAsTheStatementsBuiltWithTheSameValues() {
    QueueSql sql =
        new QueueSql(
            new org.postgresql.ds.PGSimpleDataSource(),
            dev.nolock.queue.QueueConfig.custom("mail").table("app.jobs").build());

    for (Duration lease : List.of(Duration.ofSeconds(30), Duration.ofNanos(1_500_001))) {
      assertThat(RenderedStatement.sent(dsl, sql.claim(dsl, 7, lease)))
          .isEqualTo(RenderedStatement.sent(dsl, jobs.claim(dsl, "mail", 7, lease)));
    }
    assertThat(RenderedStatement.sent(dsl, sql.complete(dsl, 12, 3)))
        .isEqualTo(RenderedStatement.sent(dsl, jobs.complete(dsl, "mail", 12, 3)));
    assertThat(sql.complete(dsl, 12, 3).fields()).hasSize(1);
    assertThat(sql.complete(dsl, 12, 3).fields()[0].getType()).isEqualTo(OffsetDateTime.class);
  }

  @Test
  void finishesAreConditionalOnTheAttemptTokenAndRunningState() {
    for (String sql :
        List.of(
            jobs.complete(dsl, "mail", 1, 2).getSQL(),
            jobs.fail(dsl, "mail", 1, 2, "boom", Duration.ofSeconds(1)).getSQL(),
            jobs.release(dsl, "mail", 1, 2).getSQL())) {
      System.out.println(sql);
      assertThat(sql).contains("\"attempt\" = ?").contains("\"state\" = 'running'");
    }
    String heartbeat = jobs.heartbeat(dsl, "mail", 1, 2, Duration.ofSeconds(3)).getSQL();
    assertThat(heartbeat)
        .contains("\"attempt\" = ?")
        .contains("\"locked_until\" > clock_timestamp()");
  }

  @Test
  void theMultiJobHeartbeatSkipsLockedRowsInsteadOfWaiting() {
    String heartbeat =
        jobs.heartbeatWithoutWaiting(
                dsl, "mail", List.of(new long[] {1, 2}, new long[] {3, 4}), Duration.ofSeconds(3))
            .getSQL();
    System.out.println(heartbeat);
    assertThat(heartbeat)
        .startsWith("with \"c\" as materialized (select \"id\" from")
        .contains("(\"id\", \"attempt\") in ((?, ?), (?, ?))")
        .contains("\"locked_until\" > clock_timestamp()")
        .contains("for update skip locked")
        .contains("from \"c\" where \"j\".\"id\" = \"c\".\"id\"");
  }

  @Test
  void enqueueSkipsPendingDuplicatesThroughThePartialUniqueIndex() {
    String sql =
        jobs.insert(
                dsl,
                "mail",
                List.of(new JobsTable.NewRow(new byte[] {1}, "k", 3, null, Duration.ZERO)))
            .getSQL();
    System.out.println(sql);
    assertThat(sql)
        .contains("on conflict (\"queue\", \"unique_key\") where (")
        .contains("\"state\" in ('ready', 'running')")
        .contains("do nothing");
  }

  @Test
  void reaperAndRetentionAlsoUseMaterializedSkipLockedCtes() {
    String reap = jobs.reap(dsl, "mail", 100).getSQL();
    String purge = jobs.purge(dsl, "mail", Duration.ofHours(1), 1000).getSQL();
    System.out.println(reap);
    System.out.println(purge);
    assertThat(reap).contains("as materialized").contains("for update skip locked");
    assertThat(purge)
        .contains("as materialized")
        .contains("for update skip locked")
        .contains("\"state\" = 'done'");
  }

  /**
   * The planner uses a partial index only when it can prove that the query's condition implies the
   * index's predicate, which a bound {@code state = $1} does not once pgjdbc switches to a generic
   * plan: so each index's predicate and every statement that relies on it carry the same inlined
   * constant.
   */
  @Test
  void theSchemaHasPartialIndexesOnTheStateConstants() {
    List<String> ddl = jobs.createSchema(dsl).stream().map(Query::getSQL).toList();
    ddl.forEach(q -> System.out.println(q + ";"));
    assertThat(ddl)
        .hasSize(6)
        .contains(
            "create index if not exists \"jobs_ready_idx\" on \"app\".\"jobs\"(\"queue\","
                + " \"run_at\", \"id\") where \"state\" = 'ready'",
            "create index if not exists \"jobs_running_idx\" on \"app\".\"jobs\"(\"queue\","
                + " \"locked_until\") where \"state\" = 'running'",
            "create index if not exists \"jobs_done_idx\" on \"app\".\"jobs\"(\"queue\","
                + " \"finished_at\") where \"state\" = 'done'",
            "create index if not exists \"jobs_dead_idx\" on \"app\".\"jobs\"(\"queue\","
                + " \"id\") where \"state\" = 'dead'",
            "create unique index if not exists \"jobs_pending_key_idx\" on"
                + " \"app\".\"jobs\"(\"queue\", \"unique_key\") where (\"unique_key\" is not null"
                + " and \"state\" in ('ready', 'running'))");

    String claim = jobs.claim(dsl, "mail", 50, Duration.ofSeconds(30)).getSQL();
    String readyStats = jobs.readyStats(dsl, "mail", 10).getSQL();
    String reap = jobs.reap(dsl, "mail", 100).getSQL();
    String purge = jobs.purge(dsl, "mail", Duration.ofHours(1), 1000).getSQL();
    String enqueue =
        jobs.insert(
                dsl,
                "mail",
                List.of(new JobsTable.NewRow(new byte[] {1}, "k", 3, null, Duration.ZERO)))
            .getSQL();
    assertThat(claim).as("the claim, on the ready index").contains("\"state\" = 'ready'");
    assertThat(readyStats)
        .as("the ready stats, on the ready index")
        .contains("\"state\" = 'ready'");
    assertThat(reap).as("the reaper, on the running index").contains("\"state\" = 'running'");
    assertThat(purge).as("retention, on the done index").contains("\"state\" = 'done'");
    assertThat(enqueue)
        .as("the enqueue's conflict target, the pending-key index")
        .contains("where (\"unique_key\" is not null and \"state\" in ('ready', 'running'))");
    for (String sql : List.of(claim, readyStats, reap, purge, enqueue)) {
      assertThat(sql)
          .as("a bound state in %s", sql)
          .doesNotContain("\"state\" = ?", "\"state\" in (?");
    }
  }
}
