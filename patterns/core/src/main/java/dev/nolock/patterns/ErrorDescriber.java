package dev.nolock.patterns;

import java.io.PrintWriter;
import java.io.StringWriter;
import java.sql.SQLException;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.Set;

/**
 * Turns a failure of your code (a job handler, a scheduled job, a payload codec, a hook) into the
 * text a background component records of it: stored in its table ({@code last_error}) and written
 * to its log. Components call it through {@link #describe(ErrorDescriber, Throwable)}.
 *
 * <p>Guarantee of the default, {@link #classNames()}: the text holds the class names of the failure
 * and of its causes (and the SQLState of an {@link SQLException} among them), never a message or a
 * stack trace. An exception's message is where payload data travels: a JSON mapper quotes the input
 * it could not read, a driver quotes the row a constraint refused, and a handler writes whatever it
 * was working on ({@code "card 4111-1111-1111-1111 declined"}). With the default nothing of it
 * lands in a table or a log line that nolock writes; the exception object itself stays yours (an
 * outcome or {@code failure()} hands it over where the component has one).
 *
 * <p>Opt in to more with {@link #messages()} (each class with its message) or {@link
 * #stackTraces()} (the whole stack trace, messages included), or a function of your own that keeps
 * what you know is safe, e.g. {@code e -> e instanceof DeclinedException d ? "declined: " +
 * d.reasonCode() : ErrorDescriber.classNames().describe(e)}.
 */
@FunctionalInterface
public interface ErrorDescriber {

  /** The text to record of {@code failure}; never called with null. */
  String describe(Throwable failure);

  /** Causes followed at most; a chain longer than this is cut with "...". */
  int MAX_CAUSES = 16;

  /**
   * The default: the failure's class name, then each cause's, as {@code
   * "java.lang.IllegalStateException; caused by java.io.IOException"}; an {@link SQLException} adds
   * its SQLState ({@code "org.postgresql.util.PSQLException [SQLSTATE 23505]"}). No message, no
   * stack trace.
   */
  static ErrorDescriber classNames() {
    return failure -> chain(failure, false);
  }

  /**
   * Each class with its message, as {@code "java.lang.IllegalStateException: card 4111 declined;
   * caused by ..."}. Stores and logs whatever the messages carry, payload data included.
   */
  static ErrorDescriber messages() {
    return failure -> chain(failure, true);
  }

  /**
   * The whole stack trace as {@link Throwable#printStackTrace()} prints it, with every message,
   * cause and suppressed exception. Stores and logs whatever the messages carry.
   */
  static ErrorDescriber stackTraces() {
    return failure -> {
      StringWriter out = new StringWriter();
      failure.printStackTrace(new PrintWriter(out));
      return out.toString();
    };
  }

  /**
   * What a component records of {@code failure}: {@code describer}'s text, or, when the describer
   * throws or returns null, {@link #classNames()}'s with a note saying so, so that recording a
   * failure never fails.
   *
   * @throws IllegalArgumentException when {@code describer} or {@code failure} is null
   */
  static String describe(ErrorDescriber describer, Throwable failure) {
    if (describer == null) {
      throw new IllegalArgumentException(
          "The error describer is null: pass one, e.g. ErrorDescriber.classNames().");
    }
    if (failure == null) {
      throw new IllegalArgumentException("The failure to describe is null.");
    }
    String text;
    try {
      text = describer.describe(failure);
    } catch (RuntimeException | StackOverflowError e) { // e.g. walking a cyclic cause chain
      return chain(failure, false) + " (the error describer threw " + chain(e, false) + ")";
    }
    return text != null ? text : chain(failure, false) + " (the error describer returned null)";
  }

  /**
   * The config check every builder applies: {@code describer} itself, or an {@link
   * IllegalArgumentException} that says how to fix the call.
   */
  static ErrorDescriber require(ErrorDescriber describer) {
    if (describer == null) {
      throw new IllegalArgumentException(
          "errorDescriber(null): pass ErrorDescriber.classNames() (the default: class names only),"
              + " ErrorDescriber.messages(), ErrorDescriber.stackTraces() or a function of your"
              + " own.");
    }
    return describer;
  }

  private static String chain(Throwable failure, boolean withMessages) {
    StringBuilder text = new StringBuilder();
    Set<Throwable> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    int depth = 0;
    for (Throwable t = failure; t != null && seen.add(t); t = t.getCause()) {
      if (depth > 0) {
        text.append("; caused by ");
      }
      if (depth++ == MAX_CAUSES) {
        text.append("...");
        break;
      }
      text.append(t.getClass().getName());
      if (t instanceof SQLException sql && sql.getSQLState() != null) {
        text.append(" [SQLSTATE ").append(sql.getSQLState()).append(']');
      }
      if (withMessages && t.getMessage() != null) {
        text.append(": ").append(t.getMessage());
      }
    }
    return text.toString();
  }
}
