package dev.nolock.spring.internal;

import dev.nolock.queue.PayloadCodec;
import tools.jackson.databind.json.JsonMapper;

/**
 * JSON payloads through the application's Jackson 3 {@link JsonMapper}. A class of its own so that
 * nothing else loads Jackson's classes when the application does not have them.
 */
public final class JacksonJson implements PayloadCodecs.Json {

  private final JsonMapper mapper;

  public JacksonJson(JsonMapper mapper) {
    this.mapper = mapper;
  }

  @Override
  public <T> PayloadCodec<T> forType(Class<T> type) {
    return PayloadCodec.of(mapper::writeValueAsBytes, bytes -> mapper.readValue(bytes, type));
  }
}
