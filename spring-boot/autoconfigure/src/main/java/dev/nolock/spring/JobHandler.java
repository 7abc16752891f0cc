package dev.nolock.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Runs the annotated bean method, or the annotated bean implementing {@link
 * dev.nolock.queue.JobHandler}, on every job of the queue {@link #value()}, in a {@link
 * dev.nolock.queue.WorkerPool} the starter starts after the context is refreshed and closes before
 * the {@code DataSource} closes (jobs in flight finish or are handed back).
 *
 * <p>On a method: one parameter, the payload {@code T} or {@link dev.nolock.queue.Job Job&lt;T&gt;}
 * (the attempt token for fencing side effects), and a return type of {@link
 * dev.nolock.queue.Completion} or {@code void} ({@code void} means {@link
 * dev.nolock.queue.Completion#complete()}). On a class implementing {@code
 * dev.nolock.queue.JobHandler<T>}, or on the {@code @Bean} method returning one: {@code T} is read
 * from the bean's generic type. Throwing fails the attempt (backoff, then dead letter).
 *
 * <p>This annotation and the interface {@code dev.nolock.queue.JobHandler} share a simple name:
 * import the one you use most and write the other qualified, e.g. {@code
 * {@literal @}dev.nolock.spring.JobHandler("receipts") class Receipts implements
 * JobHandler<Receipt>}. A bean implementing the interface without this annotation is not run by the
 * starter (start a pool for it yourself).
 *
 * <p>Start-up fails, naming the bean and method, when two handlers name one queue, when the queue
 * name is invalid, when a method's signature does not fit, or when the payload type cannot be
 * stored (neither {@code String}, {@code byte[]} nor JSON through the application's Jackson {@code
 * JsonMapper}). At most one payload type per queue: the queue's codec decodes every job.
 */
@Target({ElementType.METHOD, ElementType.TYPE})
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface JobHandler {

  /** The queue's name, as in {@code nolock.queue.queues.<name>.*}. */
  String value();
}
