package dev.nolock.spring.internal;

/**
 * One section of the {@code nolock} Actuator endpoint's report: every bean of this type adds its
 * {@link #report()} under its {@link #name()}. A pattern's auto-configuration adds its section by
 * declaring such a bean; the endpoint knows none of them.
 *
 * <p>A report is read-only and holds no payload, idempotency key or stored response: only names,
 * tokens, epochs, counts, ages and states.
 */
public interface NolockSection {

  /** The section's key in the endpoint's JSON, e.g. {@code "elections"}; unique among sections. */
  String name();

  /** The section's content, rendered as JSON (records, lists, maps, numbers, strings). */
  Object report();
}
