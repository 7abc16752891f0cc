package dev.nolock.spring.internal;

import dev.nolock.queue.PayloadCodec;
import dev.nolock.spring.JobQueues;

/**
 * The starter's codecs: {@code String} as UTF-8, {@code byte[]} as given, anything else as JSON
 * through the application's Jackson mapper, or refused when it has none.
 */
public final class PayloadCodecs implements JobQueues.Codecs {

  /** The JSON codec per type. */
  public interface Json {
    <T> PayloadCodec<T> forType(Class<T> type);
  }

  private final Json json;

  /**
   * @param json the JSON codecs, or null when the application has no JSON mapper
   */
  public PayloadCodecs(Json json) {
    this.json = json;
  }

  @Override
  @SuppressWarnings("unchecked") // each branch returns the codec of exactly that class
  public <T> PayloadCodec<T> forType(String queue, Class<T> type) {
    if (type == String.class) {
      return (PayloadCodec<T>) PayloadCodec.utf8();
    }
    if (type == byte[].class) {
      return (PayloadCodec<T>) PayloadCodec.bytes();
    }
    if (json == null) {
      throw new IllegalArgumentException(
          "The queue \""
              + queue
              + "\" has payloads of type "
              + type.getName()
              + ", stored as JSON, but the application has no Jackson JsonMapper bean: add"
              + " spring-boot-jackson (or define a tools.jackson.databind.json.JsonMapper bean),"
              + " or use String or byte[] payloads.");
    }
    return json.forType(type);
  }
}
