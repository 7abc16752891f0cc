package dev.nolock.patterns.sql;

import static org.jooq.impl.DSL.function;
import static org.jooq.impl.DSL.inline;
import static org.jooq.impl.DSL.unquotedName;
import static org.jooq.impl.DSL.val;

import dev.nolock.patterns.Lease;
import dev.nolock.patterns.Names;
import java.util.Objects;
import java.util.regex.Pattern;
import org.jooq.Field;
import org.jooq.impl.SQLDataType;

/**
 * A namespace of PostgreSQL advisory-lock keys, so that one component's locks never coincide with
 * another's, nor with an application's own advisory locks on the same names. PostgreSQL has one
 * advisory-lock space per database: before namespaces, the queue's schema lock on table {@code
 * "orders"} and an application's lock {@code hashtextextended('orders', 0)} were the same lock.
 *
 * <p>Guarantee: two different (namespace, name) pairs of {@link #of} and nolock's namespaces never
 * give the same hash input, so they are different locks up to a collision of the 64-bit hash (which
 * costs efficiency, never safety: the two merely exclude each other). The names of nolock's
 * components ({@link #QUEUE_SCHEMA}, {@link #SCHEDULE_CLAIMS}, {@link #LOCK}) are distinct and
 * reserved: {@link #of} refuses them, and {@link #unnamespaced()} refuses a bare name framed like
 * theirs ({@code "nolock...:..."}), so no caller can take one of nolock's locks. {@link
 * #unnamespaced()}, an explicit choice for interoperating with existing code, does share the
 * database-wide space with every other bare-name user, and its name {@code "billing:x"} is {@code
 * of("billing")}'s name {@code "x"}.
 *
 * <p>Algorithm of {@link #key}:
 *
 * <ol>
 *   <li>The hash input is the namespace, {@code ':'}, then the name ({@link #hashInput}). A
 *       namespace never contains {@code ':'}, so the first {@code ':'} of the input ends it and the
 *       pair can be read back: the framing is injective whatever the name contains.
 *   <li>{@code hashtextextended(:input, 0)}, the input bound (never concatenated into the SQL): the
 *       64-bit key PostgreSQL's advisory-lock functions take.
 * </ol>
 */
public final class AdvisoryLockNamespace {

  /** Longest namespace accepted. */
  public static final int MAX_LENGTH = 63;

  /** Longest name accepted (the text after the namespace). */
  public static final int MAX_NAME_LENGTH = Lease.MAX_NAME_LENGTH;

  /** What separates the namespace from the name; no namespace contains it. */
  static final char SEPARATOR = ':';

  private static final Pattern NAMESPACE = Pattern.compile("[a-z0-9][a-z0-9._-]*");
  private static final String RESERVED = "nolock";

  /** The queue's schema creation, per configured jobs table ({@code skip-locked-queue}). */
  public static final AdvisoryLockNamespace QUEUE_SCHEMA =
      new AdvisoryLockNamespace("nolock.queue.schema");

  /**
   * The claims of a scheduled job, per table OID and job, {@code oid/job} ({@code
   * scheduled-singleton}).
   */
  public static final AdvisoryLockNamespace SCHEDULE_CLAIMS =
      new AdvisoryLockNamespace("nolock.schedule.claims");

  /** The keys of {@code PostgresAdvisoryLock} ({@code fenced-lock/postgres}) by default. */
  public static final AdvisoryLockNamespace LOCK = new AdvisoryLockNamespace("nolock.lock");

  private static final AdvisoryLockNamespace NONE = new AdvisoryLockNamespace(null);

  /** Null for {@link #unnamespaced()}. */
  private final String namespace;

  private AdvisoryLockNamespace(String namespace) {
    this.namespace = namespace;
  }

  /**
   * An application's own namespace, e.g. {@code "billing"}: the key of name {@code n} is {@code
   * hashtextextended('billing:' || n, 0)}.
   *
   * @param namespace lower-case letters, digits, {@code '.'}, {@code '_'} and {@code '-'}, starting
   *     with a letter or digit, at most {@value #MAX_LENGTH} characters, and neither {@code
   *     "nolock"} nor starting with {@code "nolock."} (reserved for nolock's components)
   * @throws IllegalArgumentException for any other namespace, with how to fix it
   */
  public static AdvisoryLockNamespace of(String namespace) {
    if (namespace == null
        || namespace.length() > MAX_LENGTH
        || !NAMESPACE.matcher(namespace).matches()) {
      throw new IllegalArgumentException(
          "The advisory-lock namespace "
              + (namespace == null ? "is null" : "\"" + namespace + "\" is not allowed")
              + ": pass lower-case letters, digits, '.', '_' and '-', starting with a letter or"
              + " digit, at most "
              + MAX_LENGTH
              + " characters, e.g. \"billing\" (no ':', which separates it from the name).");
    }
    if (namespace.equals(RESERVED) || namespace.startsWith(RESERVED + ".")) {
      throw new IllegalArgumentException(
          "The advisory-lock namespace \""
              + namespace
              + "\" is reserved for nolock's components: pick one of your own, e.g. \"billing\".");
    }
    return new AdvisoryLockNamespace(namespace);
  }

  /**
   * No namespace: the key of name {@code n} is {@code hashtextextended(n, 0)}, shared with every
   * other advisory-lock user of the database that hashes the bare name. Only for excluding existing
   * code that locks that key; any such user, and any name that happens to look like {@code
   * "<namespace>:<name>"} of an application's namespace, shares these locks. A name framed like
   * nolock's own ({@code "nolock:..."}, {@code "nolock.<anything>:..."}) is refused: it would be
   * the lock of one of nolock's components (a schedule's claims, a queue's schema creation).
   */
  public static AdvisoryLockNamespace unnamespaced() {
    return NONE;
  }

  /**
   * The text hashed for {@code name}: {@code namespace + ':' + name}, or the bare name.
   *
   * @param name not blank, at most {@value #MAX_NAME_LENGTH} characters, no control characters (the
   *     rules of every name nolock sends to a backend, {@link Names#requireName})
   * @throws IllegalArgumentException for a bad name, or a bare name framed like nolock's own
   *     inputs, with how to fix it
   */
  public String hashInput(String name) {
    Names.requireName("advisory lock name", name, MAX_NAME_LENGTH);
    if (namespace != null) {
      return namespace + SEPARATOR + name;
    }
    int separator = name.indexOf(SEPARATOR);
    String framed = separator < 0 ? null : name.substring(0, separator);
    if (framed != null && (framed.equals(RESERVED) || framed.startsWith(RESERVED + "."))) {
      throw new IllegalArgumentException(
          "The unnamespaced advisory-lock name \""
              + name
              + "\" is the input of nolock's namespace \""
              + framed
              + "\", which is reserved for nolock's components: lock it in a namespace of your own,"
              + " AdvisoryLockNamespace.of(\"yours\"), or pick a name that does not start with \""
              + framed
              + ":\".");
    }
    return name;
  }

  /**
   * {@code hashtextextended(:input, 0)} for {@code name}, the input ({@link #hashInput}) bound.
   *
   * @throws IllegalArgumentException as {@link #hashInput}: a bad name never reaches the server
   */
  public Field<Long> key(String name) {
    return function(
        unquotedName("hashtextextended"), SQLDataType.BIGINT, val(hashInput(name)), inline(0L));
  }

  /**
   * {@code hashtextextended(:namespace || ':' || name, 0)} for a name the statement computes on the
   * server (e.g. from a table's OID), the namespace bound. The framing is {@link #key(String)}'s:
   * the namespace has no {@code ':'}, so the first {@code ':'} still ends it, and a server-side
   * name stays inside this namespace whatever it evaluates to. The caller makes the name injective
   * within its own namespace; it reaches the server unchecked, so it is only for nolock's own
   * namespaces and {@link #of} ones, never {@link #unnamespaced()} (whose reserved-name check needs
   * the name in hand).
   *
   * @throws IllegalStateException on {@link #unnamespaced()}
   */
  public Field<Long> key(Field<String> name) {
    if (namespace == null) {
      throw new IllegalStateException(
          "An unnamespaced advisory-lock key needs its name in hand: pass a String to key(...),"
              + " or use a namespace of your own, AdvisoryLockNamespace.of(\"yours\").");
    }
    return function(
        unquotedName("hashtextextended"),
        SQLDataType.BIGINT,
        val(namespace + SEPARATOR).concat(Objects.requireNonNull(name, "name")),
        inline(0L));
  }

  /** Same namespace, or both {@link #unnamespaced()}: the same keys for the same names. */
  @Override
  public boolean equals(Object other) {
    return other instanceof AdvisoryLockNamespace that && Objects.equals(namespace, that.namespace);
  }

  @Override
  public int hashCode() {
    return Objects.hashCode(namespace);
  }

  /**
   * {@code "AdvisoryLockNamespace[billing]"}, or {@code "AdvisoryLockNamespace.unnamespaced()"}:
   * never the string of a namespace, so a log tells {@code of("unnamespaced")} from no namespace.
   */
  @Override
  public String toString() {
    return namespace == null
        ? "AdvisoryLockNamespace.unnamespaced()"
        : "AdvisoryLockNamespace[" + namespace + "]";
  }
}
