package dev.nolock.testkit.internal;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * The {@code main} of every {@code ChildJvm}: it reads the child's system properties and its {@code
 * main}'s arguments from the environment, sets the properties, then runs the test's {@code main}
 * with the arguments.
 *
 * <p>Why: a child's command line is readable by every local user ({@code ps}, {@code
 * /proc/<pid>/cmdline}), and what tests hand a child includes endpoints with passwords (a Redis URI
 * or a PgBouncer URL the services script generated a password for). A process's environment is
 * readable only by its own user. The command line keeps only the test's main class.
 *
 * <p>Algorithm:
 *
 * <ol>
 *   <li>{@link #environment} writes {@value #PROPERTY_COUNT} and one {@code key=value} per
 *       property, {@value #ARGUMENT_COUNT} and one variable per argument, overwriting any inherited
 *       from a parent that is itself a child.
 *   <li>{@link #main} sets each property before the test's code runs (a library that reads one at
 *       its class initialisation, such as SLF4J's log level, sees it) and calls the class named by
 *       its one argument with the arguments it read.
 * </ol>
 */
public final class ChildLauncher {

  static final String PROPERTY_COUNT = "NOLOCK_CHILD_PROPERTIES";
  static final String ARGUMENT_COUNT = "NOLOCK_CHILD_ARGUMENTS";

  private ChildLauncher() {}

  /** Puts {@code properties} and {@code arguments} into a child's {@code environment}. */
  public static void environment(
      Map<String, String> environment, Map<String, String> properties, List<String> arguments) {
    List<Map.Entry<String, String>> entries = List.copyOf(properties.entrySet());
    environment.put(PROPERTY_COUNT, Integer.toString(entries.size()));
    for (int i = 0; i < entries.size(); i++) {
      String key = entries.get(i).getKey();
      if (key.isEmpty() || key.contains("=")) {
        throw new IllegalArgumentException(
            "A child's system property name must be non-empty and without '=', got \""
                + key
                + "\"");
      }
      environment.put(PROPERTY_COUNT + "_" + i, key + "=" + entries.get(i).getValue());
    }
    environment.put(ARGUMENT_COUNT, Integer.toString(arguments.size()));
    for (int i = 0; i < arguments.size(); i++) {
      environment.put(ARGUMENT_COUNT + "_" + i, arguments.get(i));
    }
  }

  /** Runs the class named by {@code args[0]} as the child's main; see the class Javadoc. */
  public static void main(String[] args) throws Throwable {
    Map<String, String> environment = System.getenv();
    int properties = Integer.parseInt(environment.get(PROPERTY_COUNT));
    for (int i = 0; i < properties; i++) {
      String property = environment.get(PROPERTY_COUNT + "_" + i);
      int equals = property.indexOf('=');
      System.setProperty(property.substring(0, equals), property.substring(equals + 1));
    }
    int count = Integer.parseInt(environment.get(ARGUMENT_COUNT));
    List<String> arguments = new ArrayList<>(count);
    for (int i = 0; i < count; i++) {
      arguments.add(environment.get(ARGUMENT_COUNT + "_" + i));
    }
    Method main = Class.forName(args[0]).getMethod("main", String[].class);
    try {
      main.invoke(null, (Object) arguments.toArray(String[]::new));
    } catch (InvocationTargetException e) {
      throw e.getCause();
    }
  }
}
