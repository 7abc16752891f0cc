package dev.nolock.idempotency.http;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.idempotency.Fingerprint;
import dev.nolock.idempotency.IdempotencyConfig;
import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.InvalidIdempotencyKeyException;
import dev.nolock.idempotency.ResultCodec;
import dev.nolock.idempotency.StoredResult;
import dev.nolock.idempotency.http.IdempotentHttpHandler.Reply;
import java.net.URI;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
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

  @Test
  void theReplyCodecRoundTripsHeadersWithEveryValueInOrder() {
    ResultCodec<Reply> codec = IdempotentHttpHandler.replyCodec();
    Reply reply =
        new Reply(201, "application/json", "{}".getBytes(StandardCharsets.UTF_8))
            .withHeader("Location", "/orders/42")
            .withHeader("link", "</a>; rel=\"next\"")
            .withHeader("Link", "</b>; rel=\"prev\"");

    Reply decoded = codec.decode(codec.encode(reply));

    assertThat(decoded).isEqualTo(reply);
    assertThat(decoded.headers().get("location")).containsExactly("/orders/42");
    assertThat(decoded.headers().get("LINK"))
        .containsExactly("</a>; rel=\"next\"", "</b>; rel=\"prev\"");
  }

  @Test
  void aReplyStoredBeforeHeadersWereKeptStillDecodes() {
    // [u16 length][content type][body], as the codec wrote a reply before it kept headers.
    byte[] type = "text/plain".getBytes(StandardCharsets.UTF_8);
    byte[] body = "ok".getBytes(StandardCharsets.UTF_8);
    byte[] stored =
        ByteBuffer.allocate(2 + type.length + body.length)
            .putShort((short) type.length)
            .put(type)
            .put(body)
            .array();

    Reply decoded = IdempotentHttpHandler.replyCodec().decode(StoredResult.of(200, stored));

    assertThat(decoded).isEqualTo(new Reply(200, "text/plain", body));
    assertThat(decoded.headers()).isEmpty();
  }

  @Test
  void aReplyRefusesHeadersThatCouldSplitTheResponseOrThatTheServerSets() {
    Reply ok = new Reply(200, "text/plain", new byte[0]);

    assertThatThrownBy(() -> ok.withHeader("Location", "/a\r\nSet-Cookie: x=1"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("no CR or LF");
    assertThatThrownBy(() -> ok.withHeader("Bad Name", "v"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("HTTP token");
    assertThatThrownBy(() -> ok.withHeader("content-length", "3"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("set by the handler or the server");
    assertThatThrownBy(() -> ok.withHeader("Content-Type", "text/html"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("contentType");
    assertThatThrownBy(() -> ok.withHeader(IdempotentHttpHandler.REPLAYED_HEADER, "true"))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new Reply(200, "text/plain", null, new byte[0]))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("Map.of()");
  }

  @Test
  void aContentTypeTheServerWouldNarrowToCrOrLfIsRefused() {
    // The JDK's header writer keeps the low byte of each char: U+010D is CR, U+010A is LF.
    assertThatThrownBy(() -> new Reply(200, "text/plain\u010D\u010Aset-cookie: x=1", new byte[0]))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("visible ASCII");
    assertThatThrownBy(() -> new Reply(200, "text/plain; charset=\u00e9", new byte[0]))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new Reply(200, "text/plain;\tcharset=utf-8", new byte[0]))
        .isInstanceOf(IllegalArgumentException.class);
    assertThat(new Reply(200, "text/plain; charset=utf-8", new byte[0]).contentType())
        .isEqualTo("text/plain; charset=utf-8");
  }

  @Test
  void aStoredReplyWithAContentTypeNoReplyMayHaveIsReplayedAsOctetStream() {
    // [u16 length][content type][body], as the codec wrote a reply before it kept headers, with a
    // content type the Reply of that time accepted.
    byte[] type = "text/plain\u010D\u010Aset-cookie: x=1".getBytes(StandardCharsets.UTF_8);
    byte[] body = "ok".getBytes(StandardCharsets.UTF_8);
    byte[] stored =
        ByteBuffer.allocate(2 + type.length + body.length)
            .putShort((short) type.length)
            .put(type)
            .put(body)
            .array();

    Reply decoded = IdempotentHttpHandler.replyCodec().decode(StoredResult.of(201, stored));

    assertThat(decoded).isEqualTo(new Reply(201, "application/octet-stream", body));
  }

  @Test
  void aStoredHeaderNoReplyMayHaveIsLeftOutOfTheReplayAndTheOthersKept() {
    // [0x01][u16][content type][u16 count]([u16][name][u16][value])*[body], written by hand: the
    // codec's encode never writes such a header, a row from elsewhere might.
    ByteBuffer row = ByteBuffer.allocate(256);
    row.put((byte) 1);
    putText(row, "application/json");
    row.putShort((short) 3);
    putText(row, "Location");
    putText(row, "/orders/1\u010D\u010Aset-cookie: x=1");
    putText(row, "Content-Length");
    putText(row, "0");
    putText(row, "Link");
    putText(row, "</orders>; rel=\"collection\"");
    row.put("{}".getBytes(StandardCharsets.UTF_8));
    byte[] stored = Arrays.copyOf(row.array(), row.position());

    Reply decoded = IdempotentHttpHandler.replyCodec().decode(StoredResult.of(201, stored));

    assertThat(decoded)
        .isEqualTo(
            new Reply(201, "application/json", "{}".getBytes(StandardCharsets.UTF_8))
                .withHeader("Link", "</orders>; rel=\"collection\""));
  }

  private static Fingerprint fingerprint(String uri, Map<String, List<String>> headers) {
    return IdempotentHttpHandler.fingerprint("POST", URI.create(uri), headers, new byte[0]);
  }

  /** An absent query and the query "null" are two requests. Before: the same fingerprint. */
  @Test
  void anAbsentQueryAndAPresentOneHaveDifferentFingerprints() {
    assertThat(fingerprint("/p", Map.of())).isNotEqualTo(fingerprint("/p?null", Map.of()));
    assertThat(fingerprint("/p", Map.of())).isNotEqualTo(fingerprint("/p?", Map.of()));
    assertThat(fingerprint("/p?a", Map.of())).isEqualTo(fingerprint("/p?a", Map.of()));
  }

  /** The request's Content-Type is part of the request; absent, empty and present all differ. */
  @Test
  void theContentTypeIsPartOfTheFingerprintWithItsPresence() {
    Fingerprint none = fingerprint("/p", Map.of());
    Fingerprint empty = fingerprint("/p", Map.of("Content-Type", List.of("")));
    Fingerprint json = fingerprint("/p", Map.of("Content-type", List.of("application/json")));

    assertThat(List.of(none, empty, json)).doesNotHaveDuplicates();
    assertThat(fingerprint("/p", Map.of("content-type", List.of("application/json"))))
        .isEqualTo(json);
    assertThat(fingerprint("/p", Map.of("Accept", List.of("application/json")))).isEqualTo(none);
  }

  /** A handler that was not told who its callers are is refused. Before: it was built. */
  @Test
  void aHandlerWithoutPrincipalOrAnonymousIsRefused() {
    IdempotencyKeys<Reply> keys =
        IdempotencyKeys.create(
            new org.postgresql.ds.PGSimpleDataSource(),
            IdempotencyConfig.ofDefaults(),
            IdempotentHttpHandler.replyCodec());
    assertThatThrownBy(
            () ->
                IdempotentHttpHandler.builder(
                        keys, "orders.create", (r, a) -> Reply.json(201, "{}"))
                    .build())
        .isInstanceOf(IllegalStateException.class)
        .hasMessageContaining("anonymous()");
  }

  private static void putText(ByteBuffer row, String text) {
    byte[] utf8 = text.getBytes(StandardCharsets.UTF_8);
    row.putShort((short) utf8.length).put(utf8);
  }
}
