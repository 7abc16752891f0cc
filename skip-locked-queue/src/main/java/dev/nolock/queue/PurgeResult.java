package dev.nolock.queue;

/**
 * What a retention purge deleted.
 *
 * @param deleted finished jobs deleted
 * @param batches statements run, each in its own short transaction (the last one deleted fewer than
 *     a full batch)
 */
public record PurgeResult(long deleted, int batches) {}
