package dev.nolock.ownership.internal;

import dev.nolock.patterns.CoordinationMetrics;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;

/**
 * The exactly-once pipeline's counters, tagged {@code component="exactly_once"}, {@code
 * name=<consumer group>} and {@code topic} (the input topic).
 */
public final class PipelineMetrics {

  public static final String COMPONENT = "exactly_once";

  private final Counter records;
  private final Counter committed;
  private final Counter aborted;
  private final Counter fenced;
  private final Counter commitTimeouts;
  private final Counter deadLettered;

  public PipelineMetrics(MeterRegistry registry, String instanceName, String topic) {
    Tags tags =
        Tags.of(
            CoordinationMetrics.COMPONENT_TAG,
            COMPONENT,
            CoordinationMetrics.NAME_TAG,
            instanceName,
            OwnershipMetrics.TOPIC_TAG,
            topic);
    this.records =
        Counter.builder("nolock.ownership.records.transformed")
            .description("Input records whose outputs and offset committed in one transaction")
            .tags(tags)
            .register(registry);
    this.committed = transactions(registry, tags, "committed");
    this.aborted = transactions(registry, tags, "aborted");
    this.fenced =
        Counter.builder("nolock.ownership.producer.fenced")
            .description("Producers fenced by a newer one with the same transactional.id")
            .tags(tags)
            .register(registry);
    this.deadLettered =
        Counter.builder("nolock.ownership.records.dead.lettered")
            .description(
                "Input records that failed for good, committed to the dead-letter topic with the"
                    + " input offsets in one transaction")
            .tags(tags)
            .register(registry);
    this.commitTimeouts =
        Counter.builder("nolock.ownership.commit.timeouts")
            .description(
                "commitTransaction or abortTransaction calls that timed out (max.block.ms) and were"
                    + " called again")
            .tags(tags)
            .register(registry);
  }

  private static Counter transactions(MeterRegistry registry, Tags tags, String outcome) {
    return Counter.builder("nolock.ownership.transactions")
        .description("Transactions of the consume-transform-produce loop")
        .tags(tags)
        .tag(CoordinationMetrics.OUTCOME_TAG, outcome)
        .register(registry);
  }

  public void committed(int inputRecords, int deadLetteredRecords) {
    committed.increment();
    records.increment(inputRecords - deadLetteredRecords);
    deadLettered.increment(deadLetteredRecords);
  }

  public void aborted() {
    aborted.increment();
  }

  public void fenced() {
    fenced.increment();
  }

  public void commitTimedOut() {
    commitTimeouts.increment();
  }
}
