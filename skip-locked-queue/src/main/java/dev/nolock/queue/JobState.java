package dev.nolock.queue;

import java.util.Locale;

/**
 * Where a job is in its life, as stored in the {@code state} column.
 *
 * <pre>
 *   enqueue ──► READY ──claim──► RUNNING ──complete──► DONE ──purge──► (deleted)
 *               │ ▲                 │
 *               │ │  fail (retries  │ fail (attempts used up),
 *               │ │  left), release,│ reaper (attempts used up)
 *               │ │  reaper         ▼
 *               │ └──────────────  DEAD ──admin().retry──► READY
 *               │
 *               └──admin().cancel──► CANCELLED ──purge──► (deleted)
 * </pre>
 */
public enum JobState {
  /** Waiting to be claimed once its {@code run_at} has come. */
  READY,
  /** Claimed by a worker whose lease ({@code locked_until}) and attempt token it carries. */
  RUNNING,
  /** Completed; kept until retention purges it. */
  DONE,
  /** Dead-lettered after its last allowed attempt failed; keeps its last error. */
  DEAD,
  /**
   * Cancelled while ready ({@link QueueAdmin#cancel}): never claimed again; kept, with the time of
   * the cancellation in {@code finished_at}, until retention purges it.
   */
  CANCELLED;

  /** The value stored in the {@code state} column: the name in lower case. */
  public String sqlValue() {
    return name().toLowerCase(Locale.ROOT);
  }

  /** The state stored as {@code value}. */
  public static JobState fromSql(String value) {
    return valueOf(value.toUpperCase(Locale.ROOT));
  }
}
