package dev.nolock.spring.internal;

import dev.nolock.spring.Idempotent;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.lang.reflect.Type;
import org.springframework.core.MethodParameter;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpInputMessage;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.converter.HttpMessageConverter;
import org.springframework.web.bind.annotation.ControllerAdvice;
import org.springframework.web.context.request.RequestAttributes;
import org.springframework.web.context.request.RequestContextHolder;
import org.springframework.web.server.ResponseStatusException;
import org.springframework.web.servlet.mvc.method.annotation.RequestBodyAdviceAdapter;

/**
 * Keeps the raw body of an {@link Idempotent} method's {@code @RequestBody}, read in full before it
 * is converted, for the request's fingerprint: the converted object would not tell two bodies apart
 * that differ in a field it ignores.
 */
@ControllerAdvice
public final class IdempotentBodies extends RequestBodyAdviceAdapter {

  static final String BODY = IdempotentBodies.class.getName() + ".body";

  private final int maxBodyBytes;

  public IdempotentBodies(int maxBodyBytes) {
    this.maxBodyBytes = maxBodyBytes;
  }

  @Override
  public boolean supports(
      MethodParameter parameter,
      Type targetType,
      Class<? extends HttpMessageConverter<?>> converterType) {
    return parameter.hasMethodAnnotation(Idempotent.class);
  }

  @Override
  public HttpInputMessage beforeBodyRead(
      HttpInputMessage input,
      MethodParameter parameter,
      Type targetType,
      Class<? extends HttpMessageConverter<?>> converterType)
      throws IOException {
    byte[] body = read(input.getBody(), maxBodyBytes);
    if (body == null) {
      throw new ResponseStatusException(
          HttpStatusCode.valueOf(413),
          "The request body is larger than " + maxBodyBytes + " bytes.");
    }
    RequestContextHolder.currentRequestAttributes()
        .setAttribute(BODY, body, RequestAttributes.SCOPE_REQUEST);
    HttpHeaders headers = input.getHeaders();
    return new HttpInputMessage() {
      @Override
      public InputStream getBody() {
        return new ByteArrayInputStream(body);
      }

      @Override
      public HttpHeaders getHeaders() {
        return headers;
      }
    };
  }

  /** The whole stream, or null, with the rest unread, past {@code max} bytes. */
  static byte[] read(InputStream in, int max) throws IOException {
    byte[] body = in.readNBytes(max + 1);
    return body.length > max ? null : body;
  }
}
