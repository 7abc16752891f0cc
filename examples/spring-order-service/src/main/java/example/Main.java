package example;

import java.io.IOException;
import java.net.ServerSocket;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

/**
 * Runs the order service as a fleet of two and checks what nolock promises it:
 *
 * <ol>
 *   <li>creates the service's tables in a schema of its own, then starts two instances of {@link
 *       OrderService}, each in its own JVM, with the nightly batch due every second;
 *   <li>sends each order three times at once with one {@code Idempotency-Key}, spread over both
 *       instances, retrying on the other instance when one does not answer (as a load balancer
 *       would) and after a 409 (the key is in progress);
 *   <li>half-way, kills the instance that leads the report election with SIGKILL: its requests,
 *       receipts, scheduled run and term are cut off wherever they were;
 *   <li>waits until every receipt was sent and the surviving instance wrote a report in a term of
 *       its own, stops it gracefully, and checks the database: one order per key, and every answer
 *       for a key names that order; one receipt per order; one batch per scheduled time; every
 *       report of a term written by one instance.
 * </ol>
 *
 * Exits 0 when every check holds, 1 otherwise (with the instances' logs in target/).
 */
public final class Main {

  private static final String SCHEMA = "order_service_" + Long.toString(System.nanoTime(), 36);
  private static final int KEYS = 40;
  private static final int COPIES = 3;
  private static final Duration DEADLINE = Duration.ofSeconds(90);

  private final String pgUrl;
  private final String redisUri;
  private final HttpClient http =
      HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(2)).build();
  private final List<String> failures = new ArrayList<>();

  private Main(String pgUrl, String redisUri) {
    this.pgUrl = pgUrl;
    this.redisUri = redisUri;
  }

  public static void main(String[] args) throws Exception {
    String pg = env("NOLOCK_PG_URL", "jdbc:postgresql://127.0.0.1:5432/test?user=postgres");
    String redis = env("NOLOCK_REDIS_URI", "redis://127.0.0.1:6379");
    System.exit(new Main(pg, redis).run());
  }

  private int run() throws Exception {
    String url = pgUrl + (pgUrl.contains("?") ? "&" : "?") + "currentSchema=" + SCHEMA;
    createTables();
    Instance a = Instance.start("a", url, redisUri);
    Instance b = null;
    try {
      a.awaitReady(http);
      // One after the other: both would otherwise create nolock's tables at the same moment.
      b = Instance.start("b", url, redisUri);
      b.awaitReady(http);
      Instance[] fleet = {a, b};

      AtomicInteger answered = new AtomicInteger();
      Map<String, Set<String>> bodies = new ConcurrentHashMap<>();
      ExecutorService clients = Executors.newFixedThreadPool(8);
      List<Future<?>> requests = new ArrayList<>();
      for (int k = 0; k < KEYS; k++) {
        String key = "order-" + k + "-" + Instant.now().toEpochMilli();
        String body = "{\"item\":\"book-" + k + "\",\"quantity\":" + (k % 5 + 1) + "}";
        for (int copy = 0; copy < COPIES; copy++) {
          int first = (k + copy) % 2;
          requests.add(
              clients.submit(
                  () -> {
                    bodies
                        .computeIfAbsent(key, any -> ConcurrentHashMap.newKeySet())
                        .add(post(fleet, first, key, body));
                    answered.incrementAndGet();
                    return null;
                  }));
        }
      }
      awaitCount(answered, KEYS * COPIES / 2);
      Instance leader = currentLeader(fleet);
      Instance survivor = leader == a ? b : a;
      System.out.printf("killing instance %s (the report leader) with SIGKILL%n", leader.name);
      leader.process.destroyForcibly().waitFor();
      for (Future<?> request : requests) {
        request.get(DEADLINE.toSeconds(), TimeUnit.SECONDS);
      }
      clients.shutdown();

      awaitReceiptsAndATermOf(survivor);
      survivor.process.destroy(); // SIGTERM: Spring's graceful shutdown
      if (!survivor.process.waitFor(30, TimeUnit.SECONDS)) {
        failures.add("instance " + survivor.name + " did not stop within 30 s of SIGTERM");
      }
      bodies.forEach(
          (key, answers) -> {
            if (answers.size() != 1) {
              failures.add("key " + key + " got different answers: " + answers);
            }
          });
      check();
      if (failures.isEmpty()) {
        execute("drop schema " + SCHEMA + " cascade");
      }
    } finally {
      a.process.destroyForcibly();
      if (b != null) {
        b.process.destroyForcibly();
      }
    }
    if (!failures.isEmpty()) {
      failures.forEach(f -> System.out.println("FAILED: " + f));
      System.out.println("instance logs: " + Path.of("target").toAbsolutePath());
      return 1;
    }
    return 0;
  }

  /** POSTs until an instance answers with the order: 201, or the replay of the first 201. */
  private String post(Instance[] fleet, int first, String key, String body) throws Exception {
    int target = first;
    Instant deadline = Instant.now().plus(DEADLINE);
    while (Instant.now().isBefore(deadline)) {
      HttpRequest request =
          HttpRequest.newBuilder(URI.create(fleet[target].base + "/orders"))
              .timeout(Duration.ofSeconds(10))
              .header("Content-Type", "application/json")
              .header("Idempotency-Key", key)
              .POST(HttpRequest.BodyPublishers.ofString(body))
              .build();
      try {
        HttpResponse<String> answer = http.send(request, HttpResponse.BodyHandlers.ofString());
        if (answer.statusCode() == 201) {
          return answer.headers().firstValue("Location").orElse("no Location")
              + " "
              + answer.body();
        }
        if (answer.statusCode() != 409 && answer.statusCode() != 503) {
          throw new IllegalStateException(
              "key " + key + ": HTTP " + answer.statusCode() + " " + answer.body());
        }
        // 409: the key is in progress (on an instance that may have died: its lease runs out).
        TimeUnit.MILLISECONDS.sleep(200);
      } catch (IOException unreachable) {
        target = 1 - target; // the instance is gone: the other one, as a load balancer would
      }
    }
    throw new IllegalStateException("key " + key + ": no answer within " + DEADLINE);
  }

  private void execute(String sql) throws SQLException {
    try (Connection c = DriverManager.getConnection(pgUrl);
        Statement s = c.createStatement()) {
      s.execute(sql);
    }
  }

  private void createTables() throws SQLException {
    try (Connection c = DriverManager.getConnection(pgUrl);
        Statement s = c.createStatement()) {
      s.execute("create schema " + SCHEMA);
      s.execute("set search_path to " + SCHEMA);
      // No unique key on what the checks count: a duplicate must show, not be refused.
      s.execute(
          "create table orders (id bigserial primary key, idempotency_key text not null,"
              + " item text not null, quantity int not null, instance text not null)");
      s.execute("create table receipts_sent (order_id bigint not null, instance text not null)");
      s.execute(
          "create table nightly_totals (scheduled_at timestamptz not null, orders bigint not null,"
              + " instance text not null)");
      s.execute(
          "create table leader_reports (token bigint not null, instance text not null,"
              + " orders bigint not null, written_at timestamptz not null default"
              + " clock_timestamp())");
    }
  }

  private Instance currentLeader(Instance[] fleet) throws Exception {
    Instant deadline = Instant.now().plus(DEADLINE);
    while (Instant.now().isBefore(deadline)) {
      String name =
          queryString(
              "select instance from leader_reports order by written_at desc limit 1", "none");
      for (Instance instance : fleet) {
        if (instance.name.equals(name)) {
          return instance;
        }
      }
      TimeUnit.MILLISECONDS.sleep(200);
    }
    throw new IllegalStateException("no instance wrote a report within " + DEADLINE);
  }

  private void awaitReceiptsAndATermOf(Instance survivor) throws Exception {
    Instant deadline = Instant.now().plus(DEADLINE);
    while (Instant.now().isBefore(deadline)) {
      boolean allSent =
          queryLong(
                  "select count(*) from orders o where not exists"
                      + " (select 1 from receipts_sent r where r.order_id = o.id)")
              == 0;
      boolean survivorLed =
          queryLong("select count(*) from leader_reports where instance = '" + survivor.name + "'")
              > 0;
      if (allSent && survivorLed) {
        return;
      }
      TimeUnit.MILLISECONDS.sleep(200);
    }
    failures.add("within " + DEADLINE + ": not every receipt sent, or no term of " + survivor.name);
  }

  private void check() throws SQLException {
    long keys = queryLong("select count(distinct idempotency_key) from orders");
    long orders = queryLong("select count(*) from orders");
    if (keys != KEYS || orders != KEYS) {
      failures.add(
          KEYS + " keys sent " + COPIES + " times each: " + orders + " orders, " + keys + " keys");
    }
    long receipts = queryLong("select count(*) from receipts_sent");
    long receiptOrders = queryLong("select count(distinct order_id) from receipts_sent");
    if (receipts != orders || receiptOrders != orders) {
      failures.add(orders + " orders: " + receipts + " receipts for " + receiptOrders + " orders");
    }
    long runs = queryLong("select count(*) from nightly_totals");
    long times = queryLong("select count(distinct scheduled_at) from nightly_totals");
    if (runs != times || times < 3) {
      failures.add(
          "nightly batch: " + runs + " runs for " + times + " scheduled times (at least 3)");
    }
    long terms = queryLong("select count(distinct token) from leader_reports");
    long split =
        queryLong(
            "select count(*) from (select token from leader_reports group by token"
                + " having count(distinct instance) > 1) shared");
    if (split != 0 || terms < 2) {
      failures.add(
          "reports: "
              + split
              + " of "
              + terms
              + " terms written by two instances (at least 2 terms)");
    }
    System.out.printf(
        "orders: %d keys sent %d times each, %d orders; receipts: %d, one per order;"
            + " nightly batch: %d scheduled times, %d runs; reports: %d terms, each by one"
            + " instance%n",
        KEYS, COPIES, orders, receipts, times, runs, terms);
  }

  private long queryLong(String sql) throws SQLException {
    return Long.parseLong(queryString(sql, "0"));
  }

  private String queryString(String sql, String none) throws SQLException {
    try (Connection c = DriverManager.getConnection(pgUrl);
        Statement s = c.createStatement()) {
      s.execute("set search_path to " + SCHEMA);
      try (ResultSet r = s.executeQuery(sql)) {
        return r.next() ? r.getString(1) : none;
      }
    }
  }

  private static void awaitCount(AtomicInteger count, int atLeast) throws InterruptedException {
    Instant deadline = Instant.now().plus(DEADLINE);
    while (count.get() < atLeast && Instant.now().isBefore(deadline)) {
      TimeUnit.MILLISECONDS.sleep(50);
    }
  }

  private static String env(String name, String fallback) {
    String value = System.getenv(name);
    return value == null || value.isBlank() ? fallback : value;
  }

  /** One instance of the service in a JVM of its own, its output in target/instance-NAME.log. */
  private record Instance(String name, String base, Process process) {

    static Instance start(String name, String pgUrl, String redisUri) throws IOException {
      int port;
      try (ServerSocket probe = new ServerSocket(0)) {
        port = probe.getLocalPort();
      }
      Path log = Path.of("target", "instance-" + name + ".log");
      Files.createDirectories(log.getParent());
      ProcessBuilder builder =
          new ProcessBuilder(
                  Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                  "-Xmx256m",
                  "-XX:TieredStopAtLevel=1",
                  "-cp",
                  System.getProperty("java.class.path"),
                  OrderService.class.getName(),
                  "--server.port=" + port,
                  "--server.address=127.0.0.1",
                  "--orders.instance=" + name,
                  "--orders.nightly-cron=* * * * * *")
              .redirectErrorStream(true)
              .redirectOutput(log.toFile());
      builder.environment().put("ORDERS_PG_URL", pgUrl);
      builder.environment().put("ORDERS_REDIS_URI", redisUri);
      return new Instance(name, "http://127.0.0.1:" + port, builder.start());
    }

    /** Until the instance answers HTTP at all (a 404 for "/" will do). */
    void awaitReady(HttpClient http) throws Exception {
      Instant deadline = Instant.now().plus(DEADLINE);
      while (Instant.now().isBefore(deadline)) {
        if (!process.isAlive()) {
          throw new IllegalStateException(
              "instance "
                  + name
                  + " exited with "
                  + process.exitValue()
                  + ": see target/instance-"
                  + name
                  + ".log");
        }
        try {
          http.send(
              HttpRequest.newBuilder(URI.create(base + "/")).build(),
              HttpResponse.BodyHandlers.discarding());
          return;
        } catch (IOException notYet) {
          TimeUnit.MILLISECONDS.sleep(200);
        }
      }
      throw new IllegalStateException("instance " + name + " did not answer within " + DEADLINE);
    }
  }
}
