package dev.nolock.idempotency.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.idempotency.InvalidIdempotencyKeyException;
import dev.nolock.idempotency.ResultCodec;
import dev.nolock.idempotency.http.IdempotentHttpHandler.Reply;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

class IdempotentHttpHandlerTest {

  @Test
  void aBareHeaderValueIsTheKeyWithoutSurroundingSpaces() {
    assertThat(IdempotentHttpHandler.parseHeaderValue(" 8e03978e-40d5 "))
        .isEqualTo("8e03978e-40d5");
  }

  @Test
  void aQuotedHeaderValueIsParsedAsAStructuredFieldString() {
    assertThat(IdempotentHttpHandler.parseHeaderValue("\"8e03978e-40d5\""))
        .isEqualTo("8e03978e-40d5");
    assertThat(IdempotentHttpHandler.parseHeaderValue("\"a\\\"b\\\\c\"")).isEqualTo("a\"b\\c");
  }

  @Test
  void malformedQuotedValuesAreRefused() {
    assertThatThrownBy(() -> IdempotentHttpHandler.parseHeaderValue("\"open"))
        .isInstanceOf(InvalidIdempotencyKeyException.class);
    assertThatThrownBy(() -> IdempotentHttpHandler.parseHeaderValue("\"a\"b"))
        .isInstanceOf(InvalidIdempotencyKeyException.class);
    assertThatThrownBy(() -> IdempotentHttpHandler.parseHeaderValue("\"a\\nb\""))
        .isInstanceOf(InvalidIdempotencyKeyException.class);
  }

  @Test
  void theReplyCodecRoundTripsStatusContentTypeAndBody() {
    ResultCodec<Reply> codec = IdempotentHttpHandler.replyCodec();
    Reply reply =
        new Reply(
            402,
            "application/json; charset=utf-8",
            "{\"error\":\"declined\"}".getBytes(StandardCharsets.UTF_8));

    Reply decoded = codec.decode(codec.encode(reply));

    assertThat(decoded).isEqualTo(reply);
    assertThat(codec.encode(reply).status()).isEqualTo(402);
    assertThat(codec.decode(codec.encode(new Reply(204, "text/plain", new byte[0]))).body())
        .isEmpty();
  }

  @Test
  void aReplyNeedsAFinalStatus() {
    assertThatThrownBy(() -> new Reply(100, "text/plain", new byte[0]))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new Reply(200, "", new byte[0]))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
