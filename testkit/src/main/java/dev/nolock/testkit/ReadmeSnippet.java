package dev.nolock.testkit;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * A README's {@code java} block, held against the code a test runs, so that the README and the code
 * cannot drift: a module's {@code ReadmeSnippetsIT} runs the snippet between {@code // --- README:
 * <region> ---} and the next {@code // --- end} line of its own source, and asserts with {@link
 * #assertRunBy} that the README shows that code.
 *
 * <p>{@link #assertRunBy} compares in four steps:
 *
 * <ol>
 *   <li>Each {@code import} line of the README block must name a class on the test's class path.
 *   <li>The rest of the block and the test's region lose all whitespace, so indentation and line
 *       breaks (google-java-format wraps the indented test differently) do not count.
 *   <li>In the block, each {@link #readmeOnly} text is removed (setup the test does its own way,
 *       such as creating a client from the environment) and each {@link #replacing} text replaced
 *       (a table name the test makes unique); each must occur, so they cannot go stale either.
 *   <li>The two must then be equal, except that the block may end with closing braces the test
 *       keeps open to assert inside them.
 * </ol>
 *
 * Written by hand: a Markdown parser is not needed to find a fenced block, and no library compares
 * a README with a test.
 */
public final class ReadmeSnippet {

  private final Path readme;
  private final String marker;
  private final String code;
  private final List<String[]> replacements = new ArrayList<>();

  private ReadmeSnippet(Path readme, String marker, String code) {
    this.readme = readme;
    this.marker = marker;
    this.code = code;
  }

  /**
   * The first {@code ```java} block after the first line of {@code readme} that contains {@code
   * marker} (a heading such as {@code "### HTTP"}).
   */
  public static ReadmeSnippet javaBlock(Path readme, String marker) {
    List<String> lines = read(readme);
    int at = 0;
    while (at < lines.size() && !lines.get(at).contains(marker)) {
      at++;
    }
    if (at == lines.size()) {
      throw new AssertionError(readme + " has no line containing \"" + marker + "\"");
    }
    while (at < lines.size() && !lines.get(at).strip().equals("```java")) {
      at++;
    }
    StringBuilder code = new StringBuilder();
    for (at++; at < lines.size() && !lines.get(at).strip().equals("```"); at++) {
      code.append(lines.get(at)).append('\n');
    }
    if (at >= lines.size()) {
      throw new AssertionError(
          readme + " has no complete ```java block after the line containing \"" + marker + "\"");
    }
    return new ReadmeSnippet(readme, marker, code.toString());
  }

  /** The block as the README shows it. */
  public String code() {
    return code;
  }

  /** README code the test does not run, because it sets that up its own way. */
  public ReadmeSnippet readmeOnly(String readmeCode) {
    return replacing(readmeCode, "");
  }

  /** README code the test runs as {@code testCode}, e.g. a table name made unique. */
  public ReadmeSnippet replacing(String readmeCode, String testCode) {
    replacements.add(new String[] {readmeCode, testCode});
    return this;
  }

  /**
   * Asserts that the test whose source is {@code test} (under {@code src/test/java} of the module
   * the test runs in) runs this block in its region {@code region}, as the steps above say.
   */
  public void assertRunBy(Class<?> test, String region) {
    assertRunBy(Path.of("src/test/java", test.getName().replace('.', '/') + ".java"), region);
  }

  /** As {@link #assertRunBy(Class, String)}, for a test source at {@code source}. */
  public void assertRunBy(Path source, String region) {
    List<String> sourceLines = read(source);
    String start = "// --- README: " + region + " ---";
    int at = 0;
    while (at < sourceLines.size() && !sourceLines.get(at).strip().equals(start)) {
      at++;
    }
    if (at == sourceLines.size()) {
      throw new AssertionError(source + " has no line " + start);
    }
    StringBuilder ran = new StringBuilder();
    for (at++; at < sourceLines.size(); at++) {
      String line = sourceLines.get(at).strip();
      if (line.startsWith("// --- end") || line.startsWith("// --- README:")) {
        break;
      }
      ran.append(line).append('\n');
    }

    StringBuilder shown = new StringBuilder();
    for (String line : code.split("\n", -1)) {
      if (line.startsWith("import ")) {
        assertImportable(line.strip());
      } else {
        shown.append(line).append('\n');
      }
    }
    String expected = squeeze(shown.toString());
    for (String[] replacement : replacements) {
      String from = squeeze(replacement[0]);
      if (!expected.contains(from)) {
        throw new AssertionError(
            where()
                + " no longer contains \""
                + replacement[0]
                + "\", which the test replaces; update the test's readmeOnly/replacing");
      }
      expected = expected.replace(from, squeeze(replacement[1]));
    }
    String actual = squeeze(ran.toString());
    String tail = expected.startsWith(actual) ? expected.substring(actual.length()) : null;
    if (tail == null || !tail.chars().allMatch(c -> c == '}')) {
      throw new AssertionError(
          where()
              + " and the region \""
              + region
              + "\" of "
              + source
              + " differ (whitespace ignored) from here on:\n  README: "
              + excerpt(expected, actual)
              + "\n  test:   "
              + excerpt(actual, expected)
              + "\nChange both, so that the README shows the code the test runs.");
    }
  }

  private void assertImportable(String importLine) {
    String name = importLine.substring("import ".length(), importLine.length() - 1).strip();
    if (name.endsWith(".*")) {
      return; // a package: nothing to load
    }
    if (name.startsWith("static ")) {
      name = name.substring("static ".length(), name.lastIndexOf('.'));
    }
    // A nested class is Outer$Inner to the class loader.
    for (String binary = name; binary.indexOf('.') > 0; ) {
      try {
        Class.forName(binary, false, ReadmeSnippet.class.getClassLoader());
        return;
      } catch (ClassNotFoundException e) {
        int dot = binary.lastIndexOf('.');
        binary = binary.substring(0, dot) + "$" + binary.substring(dot + 1);
      }
    }
    throw new AssertionError(where() + " imports a class that does not exist: " + importLine);
  }

  private String where() {
    return "The ```java block after \"" + marker + "\" in " + readme;
  }

  private static String excerpt(String text, String other) {
    int same = 0;
    while (same < text.length()
        && same < other.length()
        && text.charAt(same) == other.charAt(same)) {
      same++;
    }
    int from = Math.max(0, same - 30);
    return (from > 0 ? "..." : "")
        + text.substring(from, Math.min(text.length(), same + 60))
        + (same + 60 < text.length() ? "..." : "");
  }

  private static String squeeze(String code) {
    return code.replaceAll("\\s+", "");
  }

  private static List<String> read(Path file) {
    try {
      return Files.readAllLines(file);
    } catch (IOException e) {
      throw new UncheckedIOException(
          "cannot read " + file.toAbsolutePath() + " (tests run in their module's directory)", e);
    }
  }
}
