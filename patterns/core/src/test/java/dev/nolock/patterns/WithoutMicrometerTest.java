package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vavr.control.Either;
import java.io.IOException;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;

/**
 * The core without Micrometer on the class path, as a user who never configures metrics has it (its
 * dependency is optional). Run only by the pom's {@code without-micrometer} execution, which takes
 * Micrometer off the test class path.
 */
class WithoutMicrometerTest {

  @Test
  void micrometerIsReallyAbsent() {
    assertThatThrownBy(() -> Class.forName("io.micrometer.core.instrument.MeterRegistry"))
        .isInstanceOf(ClassNotFoundException.class);
  }

  @Test
  void everyClassButTheMetricsAdapterLoadsAndResolvesItsSignatures() throws Exception {
    List<String> classes = coreClasses();
    assertThat(classes).as("classes found to check").hasSizeGreaterThan(20);
    for (String name : classes) {
      if (name.startsWith(CoordinationMetrics.class.getName())) {
        continue; // the one class that is Micrometer's adapter; only a registry's user loads it
      }
      Class<?> type = Class.forName(name, true, getClass().getClassLoader());
      // Resolving members fails with NoClassDefFoundError if any signature names a Micrometer type.
      assertThat(type.getDeclaredMethods()).as(name).isNotNull();
      assertThat(type.getDeclaredFields()).as(name).isNotNull();
      assertThat(type.getDeclaredConstructors()).as(name).isNotNull();
    }
  }

  @Test
  void theEverydayApiWorks() {
    ManualLeaseClock clock = new ManualLeaseClock();
    Deadline deadline = Deadline.forHolder(clock, clock.nanoTime(), Duration.ofSeconds(1));
    clock.advance(Duration.ofMillis(400));
    assertThat(deadline.remaining()).isEqualTo(Duration.ofMillis(600));
    assertThat(FencingToken.of(2).isNewerThan(FencingToken.of(1))).isTrue();
    Either<String, Integer> done = RetryPolicy.noRetry().run(clock, () -> Either.right(7));
    assertThat(done.get()).isEqualTo(7);
    assertThat(GrantOwner.processOf(GrantOwner.newGrant("worker-1"))).isEqualTo("worker-1");
  }

  private static List<String> coreClasses() throws IOException, URISyntaxException {
    Path root =
        Path.of(FencingToken.class.getProtectionDomain().getCodeSource().getLocation().toURI());
    try (Stream<Path> files = Files.walk(root)) {
      return files
          .filter(f -> f.toString().endsWith(".class"))
          .map(f -> root.relativize(f).toString())
          .filter(f -> !f.equals("module-info.class"))
          .map(f -> f.substring(0, f.length() - ".class".length()).replace('/', '.'))
          .sorted()
          .toList();
    }
  }
}
