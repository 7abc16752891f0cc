package dev.nolock.testkit;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import java.util.Map;
import java.util.stream.Collectors;
import org.junit.platform.engine.TestDescriptor;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Events;

/** Runs a contract subclass through the JUnit engine, for the suites' own negative controls. */
final class ContractRuns {

  private ContractRuns() {}

  /** The test events of running {@code contract} (a class Surefire skips: a nested one). */
  static Events run(Class<?> contract) {
    return EngineTestKit.engine("junit-jupiter")
        .selectors(selectClass(contract))
        .execute()
        .testEvents();
  }

  /**
   * Each failed test's name and its failure message: the display name, prefixed by the method's
   * name for an invocation of a parameterized test ({@code "method ANSWER_LOST"}).
   */
  static Map<String, String> failures(Events tests) {
    return tests.failed().stream()
        .collect(
            Collectors.toMap(
                e -> name(e.getTestDescriptor()),
                e ->
                    e.getPayload(TestExecutionResult.class)
                        .flatMap(TestExecutionResult::getThrowable)
                        .map(Throwable::getMessage)
                        .orElse("")));
  }

  private static String name(TestDescriptor test) {
    return test.getUniqueId().getSegments().stream()
            .filter(segment -> segment.getType().equals("test-template"))
            .map(segment -> segment.getValue().replaceFirst("\\(.*", "") + " ")
            .findFirst()
            .orElse("")
        + test.getDisplayName();
  }
}
