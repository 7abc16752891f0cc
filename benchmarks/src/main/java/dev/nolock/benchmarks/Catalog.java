package dev.nolock.benchmarks;

import java.util.List;
import java.util.Optional;

/**
 * Every measured variant, what it is, and what it is compared with. The report ranks and divides
 * only through this table, so a benchmark method without an entry is an error, never a silent
 * omission.
 */
public final class Catalog {

  /** What a variant is to its group. */
  public enum Role {
    /** nolock's implementation of the design. */
    DESIGN,
    /** The same SQL or commands without the library: the floor nothing can beat here. */
    RAW,
    /** A peer library doing the same unit of work. */
    PEER
  }

  /** The guarantee a variant gives its protected write. */
  public enum Safety {
    /** A stale holder's write is refused (fence, version check, attempt token, transaction). */
    CORRECTNESS,
    /** Mutual exclusion while the lease holds; a paused holder can still write (no token check). */
    EFFICIENCY
  }

  /**
   * @param id the JMH method or harness variant name
   * @param group the design the variant belongs to
   * @param role design, floor or peer
   * @param label what the report calls it
   * @param server the server it needs ({@code postgres}, {@code redis}, {@code dynamodb}, {@code
   *     kafka})
   * @param lockFree whether a stalled participant can make others wait
   * @param safety what it guarantees a stale writer
   * @param roundTrips round trips per successful unit of work at 10,000 keys and one thread, as
   *     counted on the wire on 2026-12-03 (pgjdbc's {@code Sync} messages, commands in Redis's
   *     {@code MONITOR}, DynamoDB requests); the drains per job, the ownership harness to
   *     PostgreSQL per command (its Kafka polls are batched)
   * @param source the JMH class with a method named {@code id}, or the {@link Harness} that reports
   *     a result with that id
   */
  public record Entry(
      String id,
      String group,
      Role role,
      String label,
      String server,
      boolean lockFree,
      Safety safety,
      String roundTrips,
      Class<?> source) {

    public boolean isHarness() {
      return Harness.class.isAssignableFrom(source);
    }
  }

  static final String CAS = "CAS on a version column (PostgreSQL)";
  static final String DYNAMO = "Conditional write with a record version (DynamoDB)";
  static final String PG_LOCK = "Fenced lock (PostgreSQL)";
  static final String ADVISORY = "Transaction-scoped advisory lock (PostgreSQL)";
  static final String REDIS_LOCK = "Fenced lock (Redis)";
  static final String QUEUE = "SKIP LOCKED queue (PostgreSQL)";
  static final String QUEUE_DRAIN = "SKIP LOCKED queue, drained by workers (PostgreSQL)";
  static final String IDEMPOTENCY = "Idempotency keys (PostgreSQL)";
  static final String OWNERSHIP = "Single-writer Kafka partitions (Kafka + PostgreSQL)";

  private static final Safety C = Safety.CORRECTNESS;
  private static final Safety E = Safety.EFFICIENCY;

  public static final List<Entry> ENTRIES =
      List.of(
          jmh(
              "casVersionColumnStore",
              CAS,
              Role.DESIGN,
              "nolock VersionColumnStore",
              "postgres",
              true,
              C,
              "2 (3 after a lost race)",
              CasBenchmark.class),
          jmh(
              "casRawJdbc",
              CAS,
              Role.RAW,
              "raw JDBC SELECT + UPDATE ... WHERE version = ?",
              "postgres",
              true,
              C,
              "2 (3 after a lost race)",
              CasBenchmark.class),
          jmh(
              "casJooqOptimisticLocking",
              CAS,
              Role.PEER,
              "jOOQ optimistic locking (store())",
              "postgres",
              true,
              C,
              "2",
              CasBenchmark.class),
          jmh(
              "dynamoVersionedStore",
              DYNAMO,
              Role.DESIGN,
              "nolock DynamoDbVersionedStore",
              "dynamodb",
              true,
              C,
              "2 requests (3 after a lost race)",
              DynamoDbBenchmark.class),
          jmh(
              "dynamoRawSdk",
              DYNAMO,
              Role.RAW,
              "raw AWS SDK GetItem + conditional UpdateItem",
              "dynamodb",
              true,
              C,
              "2 requests (3 after a lost race)",
              DynamoDbBenchmark.class),
          jmh(
              "dynamoLockClient",
              DYNAMO,
              Role.PEER,
              "AWS DynamoDB Lock Client + GetItem/PutItem",
              "dynamodb",
              false,
              E,
              "5 requests",
              DynamoDbBenchmark.class),
          jmh(
              "lockPostgresFenced",
              PG_LOCK,
              Role.DESIGN,
              "nolock FencedLock + Fence (PostgreSQL)",
              "postgres",
              false,
              C,
              "5",
              PgLockBenchmark.class),
          jmh(
              "lockPostgresRawJdbc",
              PG_LOCK,
              Role.RAW,
              "raw JDBC: the same acquire, fence, release SQL",
              "postgres",
              false,
              C,
              "5",
              PgLockBenchmark.class),
          jmh(
              "lockShedLockJdbc",
              PG_LOCK,
              Role.PEER,
              "ShedLock JdbcTemplateLockProvider (DB time) + UPDATE",
              "postgres",
              false,
              E,
              "5",
              PgLockBenchmark.class),
          jmh(
              "advisoryXactLock",
              ADVISORY,
              Role.DESIGN,
              "nolock PostgresAdvisoryLock.tryInTransaction",
              "postgres",
              false,
              C,
              "3",
              PgLockBenchmark.class),
          jmh(
              "advisoryRawJdbc",
              ADVISORY,
              Role.RAW,
              "raw JDBC pg_try_advisory_xact_lock + UPDATE",
              "postgres",
              false,
              C,
              "3",
              PgLockBenchmark.class),
          jmh(
              "lockRedisFenced",
              REDIS_LOCK,
              Role.DESIGN,
              "nolock FencedLock + RedisFence",
              "redis",
              false,
              C,
              "5",
              RedisLockBenchmark.class),
          jmh(
              "lockRedisRaw",
              REDIS_LOCK,
              Role.RAW,
              "raw Lettuce: the same Lua scripts",
              "redis",
              false,
              C,
              "5",
              RedisLockBenchmark.class),
          jmh(
              "lockRedissonRLock",
              REDIS_LOCK,
              Role.PEER,
              "Redisson RLock + GET/SET",
              "redis",
              false,
              E,
              "5",
              RedisLockBenchmark.class),
          jmh(
              "lockRedissonFencedLock",
              REDIS_LOCK,
              Role.PEER,
              "Redisson RFencedLock + GET/SET (token unchecked)",
              "redis",
              false,
              E,
              "5",
              RedisLockBenchmark.class),
          jmh(
              "queueJobQueue",
              QUEUE,
              Role.DESIGN,
              "nolock JobQueue claim(1) + complete",
              "postgres",
              true,
              C,
              "2",
              QueueBenchmark.class),
          jmh(
              "queueRawJdbc",
              QUEUE,
              Role.RAW,
              "raw JDBC: the same claim and complete SQL",
              "postgres",
              true,
              C,
              "2",
              QueueBenchmark.class),
          jmh(
              "idempotencyKeys",
              IDEMPOTENCY,
              Role.DESIGN,
              "nolock IdempotencyKeys.execute",
              "postgres",
              true,
              C,
              "5 (4 for a replay)",
              IdempotencyBenchmark.class),
          jmh(
              "idempotencyRawJdbc",
              IDEMPOTENCY,
              Role.RAW,
              "raw JDBC: the same claim, write, store SQL",
              "postgres",
              true,
              C,
              "5 (4 for a replay)",
              IdempotencyBenchmark.class),
          harness(
              "queueDrainWorkerPool",
              QUEUE_DRAIN,
              Role.DESIGN,
              "nolock WorkerPool",
              "postgres",
              true,
              C,
              "0.21 per job",
              QueueDrainHarness.class),
          harness(
              "queueDrainRawJdbc",
              QUEUE_DRAIN,
              Role.RAW,
              "raw JDBC claim 10, then complete them (two commits)",
              "postgres",
              true,
              C,
              "0.20 per job (2 per batch of 10)",
              QueueDrainHarness.class),
          harness(
              "queueDrainDbScheduler",
              QUEUE_DRAIN,
              Role.PEER,
              "db-scheduler (lock-and-fetch)",
              "postgres",
              true,
              C,
              "1.13 per job",
              QueueDrainHarness.class),
          harness(
              "ownershipPartitionOwner",
              OWNERSHIP,
              Role.DESIGN,
              "nolock PartitionOwner",
              "kafka",
              true,
              C,
              "3 to PostgreSQL per command",
              OwnershipHarness.class),
          harness(
              "ownershipRawConsumer",
              OWNERSHIP,
              Role.RAW,
              "raw KafkaConsumer + JDBC, no epoch check",
              "kafka",
              true,
              E,
              "3 to PostgreSQL per command",
              OwnershipHarness.class));

  private Catalog() {}

  public static Optional<Entry> find(String id) {
    return ENTRIES.stream().filter(entry -> entry.id().equals(id)).findFirst();
  }

  public static Entry require(String id) {
    return find(id)
        .orElseThrow(() -> new IllegalStateException(id + " is measured but not in the Catalog"));
  }

  /** The floor of {@code entry}'s group. */
  public static Optional<Entry> rawOf(Entry entry) {
    return ENTRIES.stream()
        .filter(other -> other.group().equals(entry.group()) && other.role() == Role.RAW)
        .findFirst();
  }

  public static List<String> groups() {
    return ENTRIES.stream().map(Entry::group).distinct().toList();
  }

  private static Entry jmh(
      String id,
      String group,
      Role role,
      String label,
      String server,
      boolean lockFree,
      Safety safety,
      String roundTrips,
      Class<?> benchmarkClass) {
    return new Entry(id, group, role, label, server, lockFree, safety, roundTrips, benchmarkClass);
  }

  private static Entry harness(
      String id,
      String group,
      Role role,
      String label,
      String server,
      boolean lockFree,
      Safety safety,
      String roundTrips,
      Class<? extends Harness> harness) {
    return new Entry(id, group, role, label, server, lockFree, safety, roundTrips, harness);
  }
}
