package dev.nolock.spring.internal;

import dev.nolock.queue.JobQueue;
import dev.nolock.queue.QueueAdmin;
import dev.nolock.queue.ReadyStats;
import java.util.ArrayList;
import java.util.List;

/**
 * The {@code queues} section of the {@code nolock} endpoint: per queue with a {@code @JobHandler},
 * whether its pool runs, its due backlog and its dead letters, as counts only.
 *
 * <ol>
 *   <li>The due backlog comes from {@link JobQueue#readyStats()} (one indexed query).
 *   <li>Dead letters are counted from the first page of {@link QueueAdmin#deadLetters(int)}, up to
 *       {@value QueueAdmin#MAX_PAGE}; past that the count is capped. The page's jobs, with their
 *       payloads and keys, never leave this method: only its size does.
 *   <li>A queue the database cannot read shows the error's type and message instead.
 * </ol>
 */
public final class QueuesSection implements NolockSection {

  private final QueueWorkers workers;

  public QueuesSection(QueueWorkers workers) {
    this.workers = workers;
  }

  @Override
  public String name() {
    return "queues";
  }

  @Override
  public Object report() {
    List<Queue> queues = new ArrayList<>();
    workers.queues().forEach((name, queue) -> queues.add(read(name, queue)));
    return queues;
  }

  private Queue read(String name, JobQueue<?> queue) {
    boolean running = workers.isRunning(name);
    try {
      ReadyStats stats = queue.readyStats();
      QueueAdmin.DeadLetterPage<?> dead = queue.admin().deadLetters(QueueAdmin.MAX_PAGE);
      return new Queue(
          name,
          running,
          stats.readyJobs(),
          stats.capped(),
          stats.oldestReadyAge().map(Object::toString).getOrNull(),
          dead.letters().size(),
          dead.nextAfter().isDefined(),
          null);
    } catch (RuntimeException e) {
      return new Queue(
          name,
          running,
          null,
          null,
          null,
          null,
          null,
          e.getClass().getName() + ": " + e.getMessage());
    }
  }

  /**
   * One queue.
   *
   * @param name the queue
   * @param running whether its worker pool runs
   * @param readyJobs due ready jobs, counted up to the queue's count cap
   * @param readyJobsCapped whether counting stopped at the cap
   * @param oldestReadyAge how long the oldest due job has been due (ISO-8601); null when none
   * @param deadLetters dead jobs, counted up to {@value QueueAdmin#MAX_PAGE}
   * @param deadLettersCapped whether there are more than that
   * @param error why the database could not be read; null when it answered
   */
  public record Queue(
      String name,
      boolean running,
      Long readyJobs,
      Boolean readyJobsCapped,
      String oldestReadyAge,
      Integer deadLetters,
      Boolean deadLettersCapped,
      String error) {}
}
