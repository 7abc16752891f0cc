package dev.nolock.queue;

/**
 * What a {@link WorkerPool} runs for each claimed job.
 *
 * <p>Return a {@link Completion} to say how the pool finishes the attempt; throw any exception,
 * checked ones included, to fail it (the pool calls {@link JobQueue#fail} with what {@link
 * QueueConfig#errorDescriber()} makes of the exception, by default its class names and not its
 * message, which would carry payload data into {@code last_error} and the log; so the job retries
 * with backoff or is dead-lettered). The handler runs at least once per job and may run again after
 * a crash or a pause past the lease: make its effects idempotent, or commit them with the
 * completion ({@link Completion#completeWith}), or fence them with {@code (job.id(),
 * job.attempt())}.
 *
 * @param <T> the payload type
 */
@FunctionalInterface
public interface JobHandler<T> {

  /**
   * Runs {@code job}. Called on one of the pool's worker threads; an interrupt means the pool is
   * shutting down past its timeout and the job has been handed back.
   */
  Completion handle(Job<T> job) throws Exception;
}
