package dev.nolock.patterns.sql;

import org.jooq.DSLContext;

/**
 * The caller's statements, run by an entry point on the transaction it opened or joined (the fenced
 * writes of {@link Fence#write(DSLContext, dev.nolock.patterns.Lease, SqlWork)}, the critical
 * section of {@code PostgresAdvisoryLock.tryInTransaction}, the writes that {@code
 * JobQueue.completeWith} commits with a job's completion). They may throw a checked exception: the
 * entry point rolls back what it wrote in that transaction (its own transaction, or its savepoint
 * in the caller's) and then rethrows it unchanged, the same instance.
 *
 * @param <T> what the statements return
 * @param <X> the checked exception they may throw ({@link RuntimeException} when none; a lambda
 *     that throws nothing checked infers it)
 */
@FunctionalInterface
public interface SqlWork<T, X extends Exception> {

  /** Runs the statements on {@code tx}; every statement must go through it, not another context. */
  T run(DSLContext tx) throws X;
}
