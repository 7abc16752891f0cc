package dev.nolock.ownership.internal;

import org.apache.kafka.common.errors.RecordDeserializationException;

/**
 * A record failed for good: a deserializer, the handler, the transform or a serializer threw
 * something a retry would repeat ({@link RecordFailures}). The apply rolled back (the pipeline's
 * transaction: see {@link PipelineLoop}). Without a dead-letter topic the runner stops with it;
 * with one, the record is sent there. The message names the record, never its data; the cause is
 * the deserializer's ({@link RecordDeserializationException}) or the handler's exception.
 */
public final class RecordFailedException extends IllegalStateException {

  private static final long serialVersionUID = 1L;

  /** Where the record failed: the {@code nolock.dlt.stage} header's value. */
  public enum Stage {
    KEY_DESERIALIZER("key-deserializer"),
    VALUE_DESERIALIZER("value-deserializer"),
    HANDLER("handler"),
    TRANSFORM("transform"),
    SERIALIZER("serializer");

    private final String header;

    Stage(String header) {
      this.header = header;
    }

    public String header() {
      return header;
    }
  }

  private final Stage stage;
  private final boolean deadLetterable;

  /**
   * @param deadLetterable the record is poison ({@link RecordFailures.Verdict#DEAD_LETTER}); false
   *     for a failure that must stop the runner even with a dead-letter topic
   */
  public RecordFailedException(
      Stage stage, String message, Throwable cause, boolean deadLetterable) {
    super(message, cause);
    this.stage = stage;
    this.deadLetterable = deadLetterable;
  }

  /** Whether a dead-letter topic may take the record; false stops the runner in any case. */
  public boolean deadLetterable() {
    return deadLetterable;
  }

  public Stage stage() {
    return stage;
  }
}
