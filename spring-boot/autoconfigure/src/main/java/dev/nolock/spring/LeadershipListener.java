package dev.nolock.spring;

import dev.nolock.lock.HeldLock;
import dev.nolock.patterns.FencingToken;

/**
 * A bean that hears when this instance starts and stops leading one election declared under {@code
 * nolock.leader.elections.<name>}. A listener for an election that is not declared fails start-up,
 * naming the bean.
 *
 * <p>Guarantee: for each term, {@link #startedLeading} is called before {@link #stoppedLeading},
 * and {@link #stoppedLeading} is called before the term's lease is released, so a successor's
 * {@link #startedLeading} (in any instance) comes after it unless the lease was lost. Listeners are
 * called in their {@code @Order}, and told of the end in the reverse order. A term's lease may be
 * lost at any moment (a pause, a network split): send the leader's writes through a fence with
 * {@code term.lease()}, and check {@code term.checkPointOfNoReturn} before each.
 */
public interface LeadershipListener {

  /** The name of the election, as declared under {@code nolock.leader.elections.<name>}. */
  String election();

  /**
   * This instance leads, for the term of {@code term}; its {@code token()} is the term's fencing
   * token. Runs on the elector's work thread, which is interrupted when the term ends: start what
   * the leader does and return.
   */
  void startedLeading(HeldLock term) throws Exception;

  /** The term of {@code token} ended (stepped down, lost or the context is closing): stop now. */
  void stoppedLeading(FencingToken token) throws Exception;
}
