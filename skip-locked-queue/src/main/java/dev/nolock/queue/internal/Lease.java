package dev.nolock.queue.internal;

import dev.nolock.patterns.Deadline;
import java.time.Instant;

/**
 * An extended lease: its end on the database's clock and on this process's monotonic clock.
 *
 * @param lockedUntil the new {@code locked_until}
 * @param deadline counted from before the heartbeat was sent
 */
public record Lease(Instant lockedUntil, Deadline deadline) {}
