package dev.nolock.testkit;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.List;
import java.util.function.Supplier;
import java.util.stream.Stream;
import org.assertj.core.api.Assertions;
import org.junit.jupiter.params.provider.Arguments;

/**
 * The calls of a configuration builder, or of the static factory that makes one, with a null
 * argument: for every public method of the builder's class (but {@code build}), or every public
 * static method of a given name, and every reference parameter of it, one call with that parameter
 * null and the others given a plain value. A test asserts that each throws an {@link
 * IllegalArgumentException} that says how to fix the call, never a {@link NullPointerException};
 * {@link Call#assertRefusedAsIllegalArgument()} is that assertion.
 *
 * <p>A varargs parameter is an array parameter here: it is nulled whole, and the {@link Values}
 * give the array for the other calls.
 */
public final class NullArguments {

  private NullArguments() {}

  /** One call: a label for the test report, and how to make it. */
  public record Call(String label, Runnable invoke) {
    @Override
    public String toString() {
      return label;
    }

    /**
     * Asserts that the call throws an {@link IllegalArgumentException} whose message says "null":
     * the refusal names what is missing, so the caller can fix the call. Accepting the null, or any
     * other exception (a {@link NullPointerException} above all), fails.
     */
    public void assertRefusedAsIllegalArgument() {
      // catchThrowable, not assertThatThrownBy: a call that accepts the null fails naming the call.
      Assertions.assertThat(Assertions.catchThrowable(invoke::run))
          .as("what %s throws", label)
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("null");
    }
  }

  /**
   * Each call of a fresh builder from {@code builders} with one reference argument null; {@code
   * values} gives a plain non-null value per parameter type for the other arguments.
   */
  public static Stream<Arguments> of(Supplier<?> builders, Values values) {
    Class<?> type = builders.get().getClass();
    List<Arguments> calls = new ArrayList<>();
    for (Method method : sorted(type.getMethods())) {
      if (method.getDeclaringClass() == type
          && !Modifier.isStatic(method.getModifiers())
          && !method.getName().equals("build")) {
        add(calls, method, method.getName(), builders, values);
      }
    }
    if (calls.isEmpty()) {
      throw new IllegalStateException(type + " has no public method with a reference parameter");
    }
    return calls.stream();
  }

  /**
   * Each call of the public static methods of {@code type} named {@code factory} (every overload,
   * e.g. {@code custom(String, String, String)}) with one reference argument null; {@code values}
   * gives a plain non-null value per parameter type for the other arguments.
   */
  public static Stream<Arguments> ofFactory(Class<?> type, String factory, Values values) {
    List<Arguments> calls = new ArrayList<>();
    for (Method method : sorted(type.getMethods())) {
      if (method.getDeclaringClass() == type
          && Modifier.isStatic(method.getModifiers())
          && method.getName().equals(factory)) {
        add(calls, method, type.getSimpleName() + "." + factory, () -> null, values);
      }
    }
    if (calls.isEmpty()) {
      throw new IllegalStateException(
          type + " has no public static " + factory + "(...) with a reference parameter");
    }
    return calls.stream();
  }

  private static Method[] sorted(Method[] methods) {
    // getMethods() has no order; a stable one keeps the test report comparable between runs.
    Arrays.sort(methods, Comparator.comparing(Method::toString));
    return methods;
  }

  /** One call per reference parameter of {@code method}, on a fresh target from {@code targets}. */
  private static void add(
      List<Arguments> calls, Method method, String name, Supplier<?> targets, Values values) {
    Class<?>[] parameters = method.getParameterTypes();
    for (int i = 0; i < parameters.length; i++) {
      if (parameters[i].isPrimitive()) {
        continue;
      }
      int nulled = i;
      Object[] arguments = new Object[parameters.length];
      for (int j = 0; j < parameters.length; j++) {
        arguments[j] = j == nulled ? null : plain(values, parameters[j], method);
      }
      String label = name + "(" + describe(parameters, nulled) + ")";
      calls.add(Arguments.of(new Call(label, () -> invoke(method, targets.get(), arguments))));
    }
  }

  /** A plain non-null value for a parameter type. */
  @FunctionalInterface
  public interface Values {
    Object of(Class<?> parameterType);

    /** This, but {@code value} for {@code type}: a value of a type of the module under test. */
    default Values with(Class<?> type, Object value) {
      if (!type.isInstance(value)) {
        throw new IllegalArgumentException(value + " is not a " + type.getName());
      }
      return parameterType -> parameterType == type ? value : of(parameterType);
    }

    /** This, and {@code other} for the types this does not know. */
    default Values or(Values other) {
      return parameterType -> {
        Object value = of(parameterType);
        return value != null ? value : other.of(parameterType);
      };
    }
  }

  /**
   * Plain values of the types most builders take: a lower-case name (also for a setting's {@code
   * Object} value), one (a count beside a nulled argument) and true, one second, a registry, the
   * system clocks, callbacks that do nothing; null for any other type.
   */
  public static Values plainValues() {
    return type -> {
      if (type == String.class || type == Object.class) {
        return "nolock";
      }
      if (type == int.class) {
        return 1;
      }
      if (type == long.class) {
        return 1L;
      }
      if (type == boolean.class) {
        return true;
      }
      if (type == java.time.Duration.class) {
        return java.time.Duration.ofSeconds(1);
      }
      if (type == io.micrometer.core.instrument.MeterRegistry.class) {
        return new io.micrometer.core.instrument.simple.SimpleMeterRegistry();
      }
      if (type == dev.nolock.patterns.LeaseClock.class) {
        return dev.nolock.patterns.LeaseClock.system();
      }
      if (type == java.time.Clock.class) {
        return java.time.Clock.systemUTC();
      }
      if (type == java.util.function.Consumer.class) {
        return (java.util.function.Consumer<Object>) ignored -> {};
      }
      if (type == dev.nolock.patterns.Listener.class) {
        return (dev.nolock.patterns.Listener<Object>) ignored -> {};
      }
      if (type == Runnable.class) {
        return (Runnable) () -> {};
      }
      if (type == dev.nolock.patterns.RetryPolicy.class) {
        return dev.nolock.patterns.RetryPolicy.custom().build();
      }
      return null;
    };
  }

  private static Object plain(Values values, Class<?> type, Method method) {
    Object value = values.of(type);
    if (value == null) {
      throw new IllegalStateException(
          "No plain value of " + type.getName() + " for " + method + ": add one to the Values");
    }
    return value;
  }

  private static String describe(Class<?>[] parameters, int nulled) {
    StringBuilder text = new StringBuilder();
    for (int i = 0; i < parameters.length; i++) {
      if (i > 0) {
        text.append(", ");
      }
      text.append(i == nulled ? "null" : parameters[i].getSimpleName());
    }
    return text.toString();
  }

  private static void invoke(Method method, Object target, Object[] arguments) {
    try {
      method.invoke(target, arguments);
    } catch (InvocationTargetException e) {
      if (e.getCause() instanceof RuntimeException runtime) {
        throw runtime;
      }
      throw new IllegalStateException(e.getCause());
    } catch (IllegalAccessException e) {
      throw new IllegalStateException(e);
    }
  }
}
