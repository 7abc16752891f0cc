package dev.nolock.queue;

import java.util.Objects;
import java.util.function.Consumer;
import org.jooq.DSLContext;

/**
 * How a {@link WorkerPool} finishes an attempt whose {@link JobHandler} returned normally.
 *
 * <ul>
 *   <li>{@link #complete()}: the pool calls {@link JobQueue#complete(Job)}.
 *   <li>{@link #completeWith(Consumer)}: the pool calls {@link JobQueue#completeWith}: the
 *       conditional completion first, then your writes, in one transaction; a stale attempt writes
 *       nothing. Use it for effects in the same database.
 *   <li>{@link #finishedByHandler()}: the handler already completed, failed or released the job
 *       through the {@link JobQueue} itself; the pool does nothing more.
 * </ul>
 */
public final class Completion {

  private static final Completion COMPLETE = new Completion(Kind.COMPLETE, null);
  private static final Completion FINISHED = new Completion(Kind.FINISHED_BY_HANDLER, null);

  enum Kind {
    COMPLETE,
    COMPLETE_WITH,
    FINISHED_BY_HANDLER
  }

  private final Kind kind;
  private final Consumer<DSLContext> writes;

  private Completion(Kind kind, Consumer<DSLContext> writes) {
    this.kind = kind;
    this.writes = writes;
  }

  /** Complete the job, conditional on its attempt token. */
  public static Completion complete() {
    return COMPLETE;
  }

  /**
   * Complete the job and run {@code writes} on the same transaction, after the conditional
   * completion matched; nothing is written for a stale attempt.
   */
  public static Completion completeWith(Consumer<DSLContext> writes) {
    return new Completion(Kind.COMPLETE_WITH, Objects.requireNonNull(writes, "writes"));
  }

  /** The handler finished the attempt itself; the pool leaves the job alone. */
  public static Completion finishedByHandler() {
    return FINISHED;
  }

  Kind kind() {
    return kind;
  }

  Consumer<DSLContext> writes() {
    return writes;
  }

  @Override
  public String toString() {
    return "Completion[" + kind + "]";
  }
}
