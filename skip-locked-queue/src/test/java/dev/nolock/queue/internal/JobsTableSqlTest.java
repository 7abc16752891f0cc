package dev.nolock.queue.internal;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.patterns.Names;
import java.time.Duration;
import java.util.List;
import org.jooq.DSLContext;
import org.jooq.Query;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.junit.jupiter.api.Test;

/** The statements as PostgreSQL receives them: the shapes the design depends on. */
class JobsTableSqlTest {

  private final DSLContext dsl = DSL.using(SQLDialect.POSTGRES);
  private final JobsTable jobs = new JobsTable(Names.requireSqlIdentifier("t", "app.jobs"));

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

  @Test
  void theSchemaHasPartialIndexesOnTheStateConstants() {
    for (Query q : jobs.createSchema(dsl)) {
      System.out.println(q.getSQL() + ";");
    }
    System.out.println(jobs.readyStats(dsl, "mail", 10).getSQL());
  }
}
