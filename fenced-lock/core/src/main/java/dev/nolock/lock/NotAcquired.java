package dev.nolock.lock;

import java.time.Duration;

/**
 * The lock was held by someone else for as long as the caller was willing to wait. A value, not an
 * exception: losing a race is normal.
 *
 * @param name the lock name
 * @param attempts how many times the backend was asked
 * @param waited how long the caller waited in all
 */
public record NotAcquired(String name, int attempts, Duration waited) {}
