package dev.nolock.queue;

import dev.nolock.testkit.ConcurrentCreators;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * Workers that start at once on an empty schema all call {@code createTableIfMissing()}: none may
 * fail because another created the jobs table or an index first. The advisory lock of {@code
 * JobsSchema} makes them take turns; this guards it.
 */
@ExtendWith(PostgresExtension.class)
class ConcurrentCreateIT {

  @Test
  void workersCreatingTheTableAtOnceAllSucceed(PostgresSchema pg) {
    ConcurrentCreators.assertAllSucceed(
        pg,
        "racing_jobs",
        5,
        table ->
            JobQueue.create(
                pg.dataSource(), QueueConfig.custom("q").table(table).build(), PayloadCodec.utf8()),
        JobQueue::createTableIfMissing);
  }
}
