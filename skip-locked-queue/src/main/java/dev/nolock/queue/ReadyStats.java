package dev.nolock.queue;

import io.vavr.control.Option;
import java.time.Duration;

/**
 * The due backlog of one queue, read in one cheap indexed query.
 *
 * @param readyJobs ready jobs whose {@code run_at} has come, counted up to {@code countCap}
 * @param capped true when there were at least {@code countCap} and counting stopped there
 * @param oldestReadyAge how long the oldest due job has been due (database clock); empty when none
 *     is due
 */
public record ReadyStats(long readyJobs, boolean capped, Option<Duration> oldestReadyAge) {}
