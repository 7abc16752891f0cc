package dev.nolock.benchmarks;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.benchmarks.Catalog.Entry;
import dev.nolock.benchmarks.Catalog.Role;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.openjdk.jmh.annotations.Benchmark;

/** The report ranks only through the Catalog, so it must match the benchmark methods exactly. */
class CatalogTest {

  @Test
  void everyBenchmarkMethodHasAnEntryAndEveryJmhEntryAMethod() {
    List<Class<?>> classes = new ArrayList<>();
    Catalog.ENTRIES.stream()
        .filter(entry -> !entry.isHarness())
        .map(Entry::source)
        .distinct()
        .forEach(classes::add);
    assertThat(classes).isNotEmpty();
    for (Class<?> benchmark : classes) {
      for (Method method : benchmark.getMethods()) {
        if (method.isAnnotationPresent(Benchmark.class)) {
          assertThat(Catalog.find(method.getName()))
              .as(benchmark.getSimpleName() + "." + method.getName())
              .isPresent();
        }
      }
    }
    for (Entry entry : Catalog.ENTRIES) {
      if (!entry.isHarness()) {
        assertThat(
                Arrays.stream(entry.source().getMethods())
                    .filter(m -> m.isAnnotationPresent(Benchmark.class))
                    .map(Method::getName))
            .as(entry.id())
            .contains(entry.id());
      }
    }
  }

  @Test
  void everyGroupHasExactlyOneDesignAndOneFloor() {
    for (String group : Catalog.groups()) {
      List<Entry> entries = Catalog.ENTRIES.stream().filter(e -> e.group().equals(group)).toList();
      assertThat(entries.stream().filter(e -> e.role() == Role.DESIGN)).as(group).hasSize(1);
      assertThat(entries.stream().filter(e -> e.role() == Role.RAW)).as(group).hasSize(1);
    }
  }

  @Test
  void idsAreUnique() {
    assertThat(Catalog.ENTRIES.stream().map(Entry::id)).doesNotHaveDuplicates();
  }
}
