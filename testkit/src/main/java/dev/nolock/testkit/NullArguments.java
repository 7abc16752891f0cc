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
import org.junit.jupiter.params.provider.Arguments;

/**
 * The calls of a configuration builder with a null argument: for every public method of the
 * builder's class (but {@code build}) and every reference parameter of it, one call with that
 * parameter null and the others given a plain value. A test asserts that each throws an {@link
 * IllegalArgumentException} that says how to fix the call, never a {@link NullPointerException}.
 */
public final class NullArguments {

  private NullArguments() {}

  /** One call: a label for the test report, and how to make it. */
  public record Call(String label, Runnable invoke) {
    @Override
    public String toString() {
      return label;
    }
  }

  /**
   * Each call of a fresh builder from {@code builders} with one reference argument null; {@code
   * values} gives a plain non-null value per parameter type for the other arguments.
   */
  public static Stream<Arguments> of(Supplier<?> builders, Values values) {
    Class<?> type = builders.get().getClass();
    List<Arguments> calls = new ArrayList<>();
    Method[] methods = type.getMethods();
    Arrays.sort(methods, Comparator.comparing(Method::toString));
    for (Method method : methods) {
      if (method.getDeclaringClass() != type
          || Modifier.isStatic(method.getModifiers())
          || method.getName().equals("build")
          || method.getParameterCount() == 0) {
        continue;
      }
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
        String label = method.getName() + "(" + describe(parameters, nulled) + ")";
        calls.add(Arguments.of(new Call(label, () -> invoke(method, builders.get(), arguments))));
      }
    }
    if (calls.isEmpty()) {
      throw new IllegalStateException(type + " has no public method with a reference parameter");
    }
    return calls.stream();
  }

  /** A plain non-null value for a parameter type. */
  @FunctionalInterface
  public interface Values {
    Object of(Class<?> parameterType);

    /** This, and {@code other} for the types this does not know. */
    default Values or(Values other) {
      return parameterType -> {
        Object value = of(parameterType);
        return value != null ? value : other.of(parameterType);
      };
    }
  }

  /**
   * Plain values of the types most builders take: a lower-case name, one second, a registry, the
   * system clocks, callbacks that do nothing; null for any other type.
   */
  public static Values plainValues() {
    return type -> {
      if (type == String.class) {
        return "nolock";
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
