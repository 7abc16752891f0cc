package dev.nolock.queue;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import com.zaxxer.hikari.HikariDataSource;
import dev.nolock.testkit.ChildChannel;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.HexFormat;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import org.jooq.DSLContext;
import org.jooq.SQLDialect;
import org.jooq.impl.DSL;
import org.jooq.impl.SQLDataType;

/**
 * One worker process of {@link KillAndPauseIT}: a {@link WorkerPool} whose handler does its work
 * and then appends a row to a ledger that has no unique key on the job.
 *
 * <p>Arguments: JDBC URL, queue name, ledger table, worker name, {@code FENCED} or {@code
 * UNFENCED}, gate-after count (-1: never), lease millis, concurrency, batch size.
 *
 * <ul>
 *   <li>{@code FENCED}: the ledger row is written in {@link Completion#completeWith}'s transaction,
 *       after the completion conditional on {@code (id, attempt, running)}.
 *   <li>{@code UNFENCED} (the negative control): the handler writes the ledger row and marks the
 *       job done by id alone, with no attempt-token check.
 * </ul>
 *
 * <p>Speaks the {@link ChildChannel} protocol. Events: {@code READY} once the pool runs; for the
 * gated worker, {@code HANDLED <id> <attempt>} after the handler's work for the first job past the
 * gate count, then it waits at the gate for {@code GO} (the test freezes it with SIGSTOP right
 * there, so the pause lands after the work and before the completion), then {@code LATE <id>
 * <attempt>} as the completion goes out; on {@code STOP}: closes the pool gracefully, reports
 * {@code STATS handled=<n> stale=<n>} and exits 0.
 */
public final class QueueWorkerMain {

  private QueueWorkerMain() {}

  public static void main(String[] args) throws Exception {
    String url = args[0];
    String queueName = args[1];
    String ledger = args[2];
    String worker = args[3];
    boolean fenced = args[4].equals("FENCED");
    int gateAfter = Integer.parseInt(args[5]);
    Duration lease = Duration.ofMillis(Long.parseLong(args[6]));
    int concurrency = Integer.parseInt(args[7]);
    int batchSize = Integer.parseInt(args[8]);

    ChildChannel channel = ChildChannel.open();
    HikariDataSource pool = ChildChannel.pool(url, concurrency + 3, "worker-" + worker);
    DSLContext dsl = DSL.using(pool, SQLDialect.POSTGRES);
    SimpleMeterRegistry registry = new SimpleMeterRegistry();
    JobQueue<String> queue =
        JobQueue.create(
            pool,
            QueueConfig.custom(queueName)
                .lease(lease)
                .maxAttempts(25)
                .metrics(registry, queueName)
                .build(),
            PayloadCodec.utf8());

    AtomicInteger handled = new AtomicInteger();
    AtomicBoolean gated = new AtomicBoolean();
    JobHandler<String> handler =
        job -> {
          String work = digest(job.payload()); // the job's work, before any write
          int n = handled.incrementAndGet();
          if (gateAfter >= 0 && n > gateAfter && gated.compareAndSet(false, true)) {
            channel.report("HANDLED", job.id(), job.attempt());
            channel.gate(); // the test freezes this process here with SIGSTOP
            channel.report("LATE", job.id(), job.attempt());
          }
          if (fenced) {
            return Completion.completeWith(tx -> appendLedger(tx, ledger, job, worker, work));
          }
          dsl.transaction(
              cfg -> {
                DSLContext tx = cfg.dsl();
                appendLedger(tx, ledger, job, worker, work);
                tx.update(table(name(QueueConfig.DEFAULT_TABLE)))
                    .set(field(name("state"), SQLDataType.VARCHAR), "done")
                    .setNull(field(name("locked_until"), SQLDataType.TIMESTAMPWITHTIMEZONE))
                    .set(
                        field(name("finished_at"), SQLDataType.TIMESTAMPWITHTIMEZONE),
                        field("clock_timestamp()", SQLDataType.TIMESTAMPWITHTIMEZONE))
                    .where(field(name("id"), SQLDataType.BIGINT).eq(job.id())) // no attempt check
                    .execute();
              });
          return Completion.complete();
        };

    WorkerPool<String> workers =
        WorkerPool.start(
            queue,
            WorkerConfig.custom()
                .concurrency(concurrency)
                .batchSize(batchSize)
                .pollInterval(Duration.ofMillis(200))
                .reapInterval(Duration.ofSeconds(1))
                .shutdownTimeout(Duration.ofSeconds(10))
                .build(),
            handler);
    channel.report("READY");
    channel.awaitStop();
    workers.close();
    channel.report(
        "STATS",
        "handled=" + handled.get(),
        "stale=" + (long) registry.get("nolock.fence.rejections").counter().count());
    pool.close();
    System.exit(0);
  }

  private static void appendLedger(
      DSLContext tx, String ledger, Job<String> job, String worker, String work) {
    tx.insertInto(table(name(ledger)))
        .columns(
            field(name("job_id"), SQLDataType.BIGINT),
            field(name("attempt"), SQLDataType.BIGINT),
            field(name("worker"), SQLDataType.VARCHAR),
            field(name("work"), SQLDataType.VARCHAR))
        .values(job.id(), job.attempt(), worker, work)
        .execute();
  }

  private static String digest(String payload) throws Exception {
    byte[] hash =
        MessageDigest.getInstance("SHA-256").digest(payload.getBytes(StandardCharsets.UTF_8));
    return HexFormat.of().formatHex(hash, 0, 8);
  }
}
