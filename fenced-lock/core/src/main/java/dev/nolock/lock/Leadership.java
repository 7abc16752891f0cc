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

  /**
   * The leader this candidate sees changed to {@code identity}: another candidate's, read from the
   * backend while campaigning, or this candidate's own when it wins. Called on the elector's thread
   * once per change (not for every poll), as client-go's {@code OnNewLeader}. For routing and
   * dashboards only: it lags by up to a retry period and never makes a write safe; the fence does.
   */
  default void onNewLeader(String identity) {}
}
