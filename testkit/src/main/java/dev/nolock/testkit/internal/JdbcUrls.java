package dev.nolock.testkit.internal;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * Edits the query parameters of a pgjdbc URL. pgjdbc lets a later duplicate parameter win, which
 * hides mistakes; these helpers replace a parameter instead of appending a second one.
 */
public final class JdbcUrls {

  private JdbcUrls() {}

  /** The URL with {@code name=value} set, replacing any earlier value of {@code name}. */
  public static String withParameter(String url, String name, String value) {
    int question = url.indexOf('?');
    String base = question < 0 ? url : url.substring(0, question);
    List<String> parameters = new ArrayList<>();
    if (question >= 0) {
      for (String parameter : url.substring(question + 1).split("&")) {
        if (!parameter.isEmpty() && !nameOf(parameter).equals(name)) {
          parameters.add(parameter);
        }
      }
    }
    parameters.add(name + "=" + value);
    return base + "?" + String.join("&", parameters);
  }

  /** The value of {@code name} in the URL's query, if present. */
  public static Optional<String> parameter(String url, String name) {
    int question = url.indexOf('?');
    if (question < 0) {
      return Optional.empty();
    }
    Optional<String> found = Optional.empty();
    for (String parameter : url.substring(question + 1).split("&")) {
      if (nameOf(parameter).equals(name)) {
        int equals = parameter.indexOf('=');
        found = Optional.of(equals < 0 ? "" : parameter.substring(equals + 1));
      }
    }
    return found;
  }

  private static String nameOf(String parameter) {
    int equals = parameter.indexOf('=');
    return equals < 0 ? parameter : parameter.substring(0, equals);
  }
}
