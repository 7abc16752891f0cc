package dev.nolock.queue;

import java.util.Objects;
import org.jooq.DSLContext;

/**
 * How a {@link WorkerPool} finishes an attempt whose {@link JobHandler} returned normally.
 *
 * <ul>
 *   <li>{@link #complete()}: the pool calls {@link JobQueue#complete(Job)}.
 *   <li>{@link #completeWith(Writes)}: the pool calls {@link JobQueue#completeWith}: the
 *       conditional completion first, then your writes, in one transaction; a stale attempt writes
 *       nothing. Use it for effects in the same database. Writes that throw fail the attempt as a
 *       handler that throws does.
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

  /**
   * The writes {@link #completeWith(Writes)} commits with the completion. Like {@link JobHandler},
   * they may throw any exception, checked ones included: the pool rolls the completion and the
   * writes back and fails the attempt ({@link JobQueue#fail}, with what {@link
   * QueueConfig#errorDescriber()} makes of the exception: by default its class names, not its
   * message), so the job retries with backoff or is dead-lettered.
   */
  @FunctionalInterface
  public interface Writes {

    /** Runs the writes on {@code tx}, the completion's transaction; every statement must use it. */
    void write(DSLContext tx) throws Exception;
  }

  private final Kind kind;
  private final Writes writes;

  private Completion(Kind kind, Writes writes) {
    this.kind = kind;
    this.writes = writes;
  }

  /** Complete the job, conditional on its attempt token. */
  public static Completion complete() {
    return COMPLETE;
  }

  /**
   * Complete the job and run {@code writes} on the same transaction, after the conditional
   * completion matched; nothing is written for a stale attempt. Writes that throw roll back with
   * the completion and fail the attempt, as a handler that throws does.
   */
  public static Completion completeWith(Writes writes) {
    return new Completion(Kind.COMPLETE_WITH, Objects.requireNonNull(writes, "writes"));
  }

  /** The handler finished the attempt itself; the pool leaves the job alone. */
  public static Completion finishedByHandler() {
    return FINISHED;
  }

  Kind kind() {
    return kind;
  }

  Writes writes() {
    return writes;
  }

  @Override
  public String toString() {
    return "Completion[" + kind + "]";
  }
}
