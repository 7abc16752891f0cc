package dev.nolock.spring;

import dev.nolock.lock.HeldLock;
import io.vavr.control.Option;
import java.util.function.Function;

/**
 * Runs code only while this instance leads an election declared under {@code
 * nolock.leader.elections.<name>}.
 *
 * <p>Guarantee: {@link #runIfLeader} runs its work only while this instance holds the election's
 * lease, and hands it the term, whose {@code lease()} carries the term's fencing token for a fence
 * (a lease can be lost during the work: only the fence refuses the work's writes then). A term does
 * not end (its lease is not released) while such work is running, for at most the election's {@code
 * work-stop-timeout}.
 */
public interface Leaders {

  /** True while this instance leads {@code election}. */
  boolean isLeader(String election);

  /**
   * Runs {@code work} with the current term if this instance leads {@code election}, else nothing.
   *
   * @return what {@code work} returned, or {@code Option.none()} when this instance does not lead
   * @throws IllegalArgumentException when {@code election} is not declared
   */
  <T> Option<T> runIfLeader(String election, Function<HeldLock, T> work);
}
