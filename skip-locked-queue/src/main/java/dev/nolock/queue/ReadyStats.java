package dev.nolock.queue;

import java.time.Duration;
import java.util.Optional;

/**
 * The due backlog of one queue, read in one cheap indexed query.
 *
 * @param readyJobs ready jobs whose {@code run_at} has come, counted up to {@code countCap}
 * @param capped true when there were at least {@code countCap} and counting stopped there
 * @param oldestReadyAge how long the oldest due job has been due (database clock); empty when none
 *     is due
 */
public record ReadyStats(long readyJobs, boolean capped, Optional<Duration> oldestReadyAge) {}
