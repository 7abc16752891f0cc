package dev.nolock.testkit.internal;

import dev.nolock.testkit.Endpoints;
import java.util.function.Supplier;
import org.junit.jupiter.api.extension.ExtensionContext;

/**
 * Keeps one resource per test class in the JUnit store of the class's context, so it is built on
 * first use (in {@code beforeAll} or when a parameter is resolved, whichever comes first) and
 * closed when the class is done. Stores are searched up the context tree, so a {@code @Nested}
 * class shares its enclosing class's resource.
 */
public final class ClassResources {

  private ClassResources() {}

  /**
   * The resource of {@code type} for the test class of {@code context}, created with {@code
   * factory} (which returns the resource and how to close it) if there is none yet.
   */
  public static <T> T getOrCreate(
      ExtensionContext context,
      Class<?> extensionType,
      Endpoints endpoints,
      Class<T> type,
      Supplier<Closing<T>> factory) {
    ExtensionContext classContext = classContextOf(context);
    // Keyed by value, not by extension instance: the same server and endpoints give the
    // same resource however the extension was registered.
    ExtensionContext.Store store =
        classContext.getStore(ExtensionContext.Namespace.create(extensionType, endpoints));
    String key = type.getName();
    @SuppressWarnings("unchecked")
    Closing<T> closing = store.getOrComputeIfAbsent(key, k -> factory.get(), Closing.class);
    return type.cast(closing.value());
  }

  private static ExtensionContext classContextOf(ExtensionContext context) {
    ExtensionContext current = context;
    // Method contexts (also used for constructor injection) have a test method; their
    // parent is the class context.
    while (current.getTestMethod().isPresent() || current.getTestClass().isEmpty()) {
      current =
          current
              .getParent()
              .orElseThrow(
                  () ->
                      new IllegalStateException(
                          "No test class in the JUnit context; use the extension on a test class"));
    }
    return current;
  }

  /**
   * A value and the action that releases it. JUnit (5.13 and later) closes every {@link
   * AutoCloseable} in a store when its context ends.
   */
  public record Closing<T>(T value, AutoCloseable closer) implements AutoCloseable {
    @Override
    public void close() {
      try {
        closer.close();
      } catch (RuntimeException e) {
        throw e;
      } catch (Exception e) {
        if (e instanceof InterruptedException) {
          Thread.currentThread().interrupt();
        }
        throw new IllegalStateException("could not release " + value + ": " + e.getMessage(), e);
      }
    }
  }
}
