package dev.nolock.testkit;

import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

class ReadmeSnippetTest {

  private static final String README =
      """
      # demo

      ## Usage

      ```java
      import java.time.Duration;

      Client client = Client.create(); // from the environment
      Store store =
          Store.create(client, "orders");
      try (Worker worker = store.start()) {
        // ... the application runs
      }
      ```
      """;

  private static final String TEST =
      """
      class DemoIT {
        void run() {
          // --- README: Usage ---
          Store store = Store.create(client, ordersTable);
          try (Worker worker = store.start()) {
            // ... the application runs
            // --- end of snippet ---
            assertThat(worker).isNotNull();
          }
        }
      }
      """;

  @TempDir Path dir;

  @Test
  void aReadmeBlockMatchesTheTestRegionWhitespaceAndDeclaredDifferencesAside() throws IOException {
    ReadmeSnippet snippet = snippet(README);

    assertThatCode(() -> snippet.assertRunBy(write("DemoIT.java", TEST), "Usage"))
        .doesNotThrowAnyException();
  }

  @Test
  void aChangedReadmeLineFailsWithWhereTheyDiffer() throws IOException {
    ReadmeSnippet drifted = snippet(README.replace("store.start()", "store.begin()"));

    assertThatThrownBy(() -> drifted.assertRunBy(write("DemoIT.java", TEST), "Usage"))
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("differ")
        .hasMessageContaining("store.begin()")
        .hasMessageContaining("store.start()");
  }

  @Test
  void aDeclaredDifferenceTheReadmeNoLongerHasFails() throws IOException {
    ReadmeSnippet snippet = snippet(README.replace("\"orders\"", "\"invoices\""));

    assertThatThrownBy(() -> snippet.assertRunBy(write("DemoIT.java", TEST), "Usage"))
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("no longer contains \"\"orders\"\"");
  }

  @Test
  void anImportOfAClassThatDoesNotExistFails() throws IOException {
    ReadmeSnippet snippet = snippet(README.replace("java.time.Duration", "java.time.Span"));

    assertThatThrownBy(() -> snippet.assertRunBy(write("DemoIT.java", TEST), "Usage"))
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("import java.time.Span;");
  }

  @Test
  void aMissingMarkerFails() throws IOException {
    Path readme = write("README.md", README);

    assertThatThrownBy(() -> ReadmeSnippet.javaBlock(readme, "## Usage, again"))
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("no line containing \"## Usage, again\"");
  }

  private ReadmeSnippet snippet(String readme) throws IOException {
    return ReadmeSnippet.javaBlock(write("README.md", readme), "## Usage")
        .readmeOnly("Client client = Client.create(); // from the environment")
        .replacing("\"orders\"", "ordersTable");
  }

  private Path write(String name, String content) throws IOException {
    return Files.writeString(dir.resolve(name), content);
  }
}
