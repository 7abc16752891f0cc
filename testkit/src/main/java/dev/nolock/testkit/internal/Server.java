package dev.nolock.testkit.internal;

/**
 * The servers the testkit connects to, with the names a user needs to fix a failed connection: the
 * environment variable that points at the server and the {@code scripts/services} name that starts
 * it.
 */
public enum Server {
  POSTGRES("PostgreSQL", "postgres", "NOLOCK_PG_URL"),
  REDIS("Redis", "redis", "NOLOCK_REDIS_URI"),
  KAFKA("Kafka", "kafka", "NOLOCK_KAFKA_BOOTSTRAP"),
  DYNAMODB("DynamoDB (dynalite)", "dynamodb", "NOLOCK_DYNAMODB_ENDPOINT"),
  ETCD("etcd", "etcd", "NOLOCK_ETCD_ENDPOINT"),
  PGBOUNCER("PgBouncer", "pgbouncer", "NOLOCK_PGBOUNCER_URL");

  private final String displayName;
  private final String serviceName;
  private final String variable;

  Server(String displayName, String serviceName, String variable) {
    this.displayName = displayName;
    this.serviceName = serviceName;
    this.variable = variable;
  }

  /** How people call the server, for messages: {@code "Kafka"}. */
  public String displayName() {
    return displayName;
  }

  /** The name {@code scripts/services up NAME} accepts: {@code "kafka"}. */
  public String serviceName() {
    return serviceName;
  }

  /** The environment variable (or system property) that holds the endpoint. */
  public String variable() {
    return variable;
  }

  /** The command that starts this server on a developer machine or in CI. */
  public String startCommand() {
    return "scripts/services up " + serviceName;
  }
}
