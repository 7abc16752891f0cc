package dev.nolock.lock;

/**
 * What a {@link LeaderElector} tells its owner. Callbacks run on the elector's own threads and may
 * throw checked exceptions: the elector is a background component, so what a callback throws is
 * that callback's failure, logged at error level, and the election goes on (an {@link Error} from
 * {@link #onStoppedLeading} is rethrown after the lease was released). An {@link
 * InterruptedException} is logged too, but the interrupt stays the thread's: its flag is set again,
 * so that the campaign thread ends on it as on any interrupt, and {@link LeaderElector#close()}
 * returns with it set.
 */
public interface Leadership {

  /**
   * This candidate became leader. Runs on a dedicated thread that is interrupted when leadership is
   * lost; do the leader's work here, check {@link HeldLock#checkPointOfNoReturn} before every write
   * and send writes through a fence with {@link HeldLock#lease()} (its token is this term's fencing
   * token).
   *
   * <p>An exception it throws, checked or not, ends that term's work only: it is logged at error
   * level and the candidate keeps the lease (renewed by the watchdog) until it is lost, released by
   * the work, or the elector is closed, exactly as when the work returns. Release the {@link
   * HeldLock} before throwing to let another candidate lead at once.
   */
  void onStartedLeading(HeldLock leadership) throws Exception;

  /**
   * Leadership ended: stop the leader's work at once. On {@link LeaderElector#close()} it runs
   * after the work thread was interrupted and before the elector waits for that thread ({@link
   * ElectorConfig#workStopTimeout()}) and releases the lease, so it is the place to stop work that
   * does not answer interrupts; it may wait for the work (the lease is watched meanwhile, and a
   * loss halts) — except when the work itself called {@code close()}: then it runs on the work's
   * own thread, and waiting for the work would wait for itself, for ever, with the lease renewed.
   * It runs with the interrupt flag clear even when {@code close()} was called on an interrupted
   * thread. On a loss it runs after the interrupt and after the halt: with the default halt it
   * never runs, because nothing may delay the halt. It is not called for a term whose {@link
   * #onStartedLeading} was never called. The lease is released whatever it throws; an {@link Error}
   * is rethrown after that (from {@code close()}, or ending the campaign thread). Calling {@code
   * close()} from it returns at once.
   */
  void onStoppedLeading() throws Exception;

  /**
   * The leader this candidate sees changed to {@code identity}: another candidate's, read from the
   * backend while campaigning, or this candidate's own when it wins. Called on the elector's thread
   * once per change (not for every poll), as client-go's {@code OnNewLeader}. For routing and
   * dashboards only: it lags by up to a retry period and never makes a write safe; the fence does.
   */
  default void onNewLeader(String identity) throws Exception {}
}
