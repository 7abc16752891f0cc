package dev.nolock.ownership.internal;

import org.apache.kafka.common.errors.RecordDeserializationException;

/**
 * A record failed for good: a deserializer, the handler or the transform threw something a retry
 * would repeat. The apply rolled back (the pipeline's transaction: see {@link PipelineLoop}).
 * Without a dead-letter topic the runner stops with it; with one, the record is sent there. The
 * message names the record, never its data; the cause is the deserializer's ({@link
 * RecordDeserializationException}) or the handler's exception.
 */
public final class RecordFailedException extends IllegalStateException {

  private static final long serialVersionUID = 1L;

  /** Where the record failed: the {@code nolock.dlt.stage} header's value. */
  public enum Stage {
    KEY_DESERIALIZER("key-deserializer"),
    VALUE_DESERIALIZER("value-deserializer"),
    HANDLER("handler"),
    TRANSFORM("transform");

    private final String header;

    Stage(String header) {
      this.header = header;
    }

    public String header() {
      return header;
    }
  }

  private final Stage stage;

  public RecordFailedException(Stage stage, String message, Throwable cause) {
    super(message, cause);
    this.stage = stage;
  }

  public Stage stage() {
    return stage;
  }
}
