package example;

import dev.nolock.lock.HeldLock;
import dev.nolock.patterns.sql.Fence;
import dev.nolock.queue.Completion;
import dev.nolock.queue.Job;
import dev.nolock.queue.JobQueue;
import dev.nolock.queue.NewJob;
import dev.nolock.schedule.ScheduledRun;
import dev.nolock.spring.FencedScheduled;
import dev.nolock.spring.Idempotent;
import dev.nolock.spring.JobHandler;
import dev.nolock.spring.JobQueues;
import dev.nolock.spring.Leaders;
import dev.nolock.spring.NolockTransactions;
import java.net.URI;
import java.sql.Timestamp;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.SpringApplication;
import org.springframework.boot.autoconfigure.SpringBootApplication;
import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.core.JdbcTemplate;
import org.springframework.scheduling.annotation.EnableScheduling;
import org.springframework.scheduling.annotation.Scheduled;
import org.springframework.stereotype.Component;
import org.springframework.transaction.support.TransactionTemplate;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RequestHeader;
import org.springframework.web.bind.annotation.RestController;

/**
 * The order service: every nolock pattern it uses is configured in application.yml and reached
 * through Spring (the tables are created by {@link Main}, as a migration would).
 */
@SpringBootApplication
@EnableScheduling
public class OrderService {

  public static void main(String[] args) {
    SpringApplication.run(OrderService.class, args);
  }

  record NewOrder(String item, int quantity) {}

  record Placed(long id) {}

  record Receipt(long orderId) {}

  /** POST /orders once per Idempotency-Key: the order and its receipt job commit together. */
  @RestController
  static class Orders {
    private final JdbcTemplate jdbc;
    private final JobQueue<Receipt> receipts;
    private final NolockTransactions transactions;
    private final String instance;

    Orders(
        JdbcTemplate jdbc,
        JobQueues queues,
        NolockTransactions transactions,
        @Value("${orders.instance}") String instance) {
      this.jdbc = jdbc;
      this.receipts = queues.queue("receipts", Receipt.class);
      this.transactions = transactions;
      this.instance = instance;
    }

    // Runs in the idempotency key's own transaction: the order, its receipt job and the stored
    // answer commit together, once per key, whichever instance the client's retry reaches.
    // Anonymous: this example has no authentication; with Spring Security, drop it and each
    // user's keys are their own.
    @Idempotent(anonymous = true)
    @PostMapping("/orders")
    ResponseEntity<Placed> place(
        @RequestHeader("Idempotency-Key") String key, @RequestBody NewOrder order) {
      Long id =
          jdbc.queryForObject(
              "insert into orders (idempotency_key, item, quantity, instance)"
                  + " values (?, ?, ?, ?) returning id",
              Long.class,
              key,
              order.item(),
              order.quantity(),
              instance);
      receipts.enqueue(transactions.current(), NewJob.of(new Receipt(id)));
      return ResponseEntity.created(URI.create("/orders/" + id)).body(new Placed(id));
    }
  }

  /** Sends each receipt; the ledger row commits with the job's completion, so once per job. */
  @Component
  static class Receipts {
    private final String instance;

    Receipts(@Value("${orders.instance}") String instance) {
      this.instance = instance;
    }

    @JobHandler("receipts")
    Completion send(Job<Receipt> job) {
      // ... send the mail here, with job.id() as the provider's idempotency key ...
      return Completion.completeWith(
          tx ->
              tx.execute(
                  "insert into receipts_sent (order_id, instance) values (?, ?)",
                  job.payload().orderId(),
                  instance));
    }
  }

  /** The nightly totals: each scheduled time once across the fleet, its writes fenced. */
  @Component
  static class NightlyTotals {
    private final JdbcTemplate jdbc;
    private final String instance;

    NightlyTotals(JdbcTemplate jdbc, @Value("${orders.instance}") String instance) {
      this.jdbc = jdbc;
      this.instance = instance;
    }

    @FencedScheduled(name = "nightly-totals", cron = "${orders.nightly-cron}")
    void run(ScheduledRun run) {
      jdbc.update(
          "insert into nightly_totals (scheduled_at, orders, instance) "
              + "select ?, count(*), ? from orders",
          Timestamp.from(run.scheduledAt()),
          instance);
    }
  }

  /** A report only the leader writes, each write fenced by its term's token. */
  @Component
  static class LeaderReport {
    private final Leaders leaders;
    private final Fence fence;
    private final NolockTransactions transactions;
    private final TransactionTemplate transaction;
    private final String instance;

    LeaderReport(
        Leaders leaders,
        Fence fence,
        NolockTransactions transactions,
        TransactionTemplate transaction,
        @Value("${orders.instance}") String instance) {
      this.leaders = leaders;
      this.fence = fence;
      this.transactions = transactions;
      this.transaction = transaction;
      this.instance = instance;
    }

    @Scheduled(fixedDelayString = "${orders.report-interval}")
    void report() {
      leaders.runIfLeader("reports", this::write);
    }

    private boolean write(HeldLock term) {
      return transaction.execute(
          status ->
              fence
                  .write(
                      transactions.current(),
                      term.lease(),
                      tx ->
                          tx.execute(
                              "insert into leader_reports (token, instance, orders)"
                                  + " select ?, ?, count(*) from orders",
                              term.lease().token().value(),
                              instance))
                  .isRight());
    }
  }
}
