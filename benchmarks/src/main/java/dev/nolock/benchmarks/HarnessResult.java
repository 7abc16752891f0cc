package dev.nolock.benchmarks;

import java.util.Map;

/**
 * One figure from a harness that does not fit JMH's one-invocation model (a queue drained by a
 * scheduler's own threads, a Kafka consumer applying commands).
 *
 * @param id the variant, named like a JMH method ({@code queueDrainDbScheduler})
 * @param threads worker threads (or consumers) the variant ran with
 * @param perSecond units of work completed per second over the whole measured window
 * @param detail extra figures for the report (for example the rate in each tenth of a drain)
 */
public record HarnessResult(String id, int threads, double perSecond, Map<String, String> detail) {}
