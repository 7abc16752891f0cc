package dev.nolock.lock;

import dev.nolock.patterns.Lease;
import dev.nolock.patterns.LockBackend;
import dev.nolock.testkit.ElectionCandidate;
import dev.nolock.testkit.Protection;
import dev.nolock.testkit.SqlResource;
import java.time.Duration;
import java.util.Optional;
import java.util.concurrent.CountDownLatch;

/**
 * A {@link LeaderElector} as testkit's {@code ElectionScenario} drives it, on any backend; the
 * leader writes a {@link SqlResource} row through the SQL fence. A backend's election test
 * subclasses it with a public no-argument constructor (shared through this module's test jar).
 *
 * <p>The elector runs with {@code haltOnLoss(false)}: with the default halt, a resumed leader that
 * notices its loss first would exit before its write, which is the halt's point but would hide the
 * write the fence must refuse. The halt itself is proven in {@code LeaderElectorTest}.
 */
public abstract class ElectorCandidate implements ElectionCandidate {

  private LeaderElector elector;

  /** The backend this candidate campaigns on. */
  protected abstract LockBackend backend();

  /** The resource the leader writes. */
  protected abstract SqlResource resource();

  /** Closes what the subclass opened (clients, pools). */
  protected void closeResources() {}

  @Override
  public void campaign(
      String election,
      Duration leaseDuration,
      Duration renewDeadline,
      Duration retryPeriod,
      Events events) {
    elector =
        LeaderElector.start(
            backend(),
            ElectorConfig.custom(election)
                .leaseDuration(leaseDuration)
                .renewDeadline(renewDeadline)
                .retryPeriod(retryPeriod)
                .haltOnLoss(false)
                .build(),
            new Leadership() {
              @Override
              public void onStartedLeading(HeldLock leadership) throws InterruptedException {
                leadership.checkPointOfNoReturn(Duration.ofMillis(50));
                events.elected(leadership.lease());
                new CountDownLatch(1).await(); // the leader works until it is interrupted
              }

              @Override
              public void onStoppedLeading() {
                events.stoppedLeading();
              }

              @Override
              public void onNewLeader(String identity) {
                events.newLeader(identity);
              }
            });
  }

  @Override
  public boolean write(Lease term, String value, Protection protection) {
    return resource().write(term, value, protection);
  }

  @Override
  public Optional<String> read(String election) {
    return resource().read(election);
  }

  @Override
  public void close() {
    if (elector != null) {
      elector.close();
    }
    closeResources();
  }
}
