package dev.nolock.testkit;

import static org.junit.platform.engine.discovery.DiscoverySelectors.selectClass;

import java.util.Map;
import java.util.stream.Collectors;
import org.junit.platform.engine.TestDescriptor;
import org.junit.platform.engine.TestExecutionResult;
import org.junit.platform.testkit.engine.EngineTestKit;
import org.junit.platform.testkit.engine.Events;

/**
 * Runs a contract subclass through the JUnit engine (a property container through jqwik's), for the
 * suites' own negative controls.
 */
final class ContractRuns {

  private ContractRuns() {}

  /** The test events of running {@code contract} (a class Surefire skips: a nested one). */
  static Events run(Class<?> contract) {
    return EngineTestKit.engine("junit-jupiter")
        .selectors(selectClass(contract))
        .execute()
        .testEvents();
  }

  /** The test events of running the jqwik properties of {@code properties} (a nested class). */
  static Events runProperties(Class<?> properties) {
    return EngineTestKit.engine("jqwik").selectors(selectClass(properties)).execute().testEvents();
  }

  /** The failure message of the first failed test, or "" when none failed. */
  static String firstFailure(Events tests) {
    return tests.failed().stream()
        .findFirst()
        .flatMap(
            e -> e.getPayload(TestExecutionResult.class).flatMap(TestExecutionResult::getThrowable))
        .map(Throwable::getMessage)
        .orElse("");
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
