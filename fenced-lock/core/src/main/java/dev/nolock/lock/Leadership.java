package dev.nolock.lock;

/** What a {@link LeaderElector} tells its owner. Callbacks run on the elector's own threads. */
public interface Leadership {

  /**
   * This candidate became leader. Runs on a dedicated thread that is interrupted when leadership is
   * lost; do the leader's work here, check {@link HeldLock#checkPointOfNoReturn} before every write
   * and send writes through a fence with {@link HeldLock#lease()} (its token is this term's fencing
   * token).
   */
  void onStartedLeading(HeldLock leadership) throws InterruptedException;

  /** Leadership ended (lost, or released on close). Stop the leader's work at once. */
  void onStoppedLeading();
}
