package dev.nolock.ownership;

import dev.nolock.ownership.internal.ApplyOutcome;
import dev.nolock.ownership.internal.OwnerEvents;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;

/** What a runner told its observer: claims, apply outcomes and backoffs, in order. */
class RecordingEvents implements OwnerEvents {

  record Claimed(int partition, long epoch, long lastApplied) {}

  record Outcome(int partition, long offset, long epoch, ApplyOutcome outcome) {}

  final List<Claimed> claims = new CopyOnWriteArrayList<>();
  final List<Outcome> outcomes = new CopyOnWriteArrayList<>();
  final List<Duration> backoffs = new CopyOnWriteArrayList<>();
  final CountDownLatch claimed = new CountDownLatch(1);
  final CountDownLatch backedOff = new CountDownLatch(1);

  @Override
  public void claimed(int partition, long epoch, long lastApplied) {
    claims.add(new Claimed(partition, epoch, lastApplied));
    claimed.countDown();
  }

  @Override
  public void outcome(int partition, long offset, long epoch, ApplyOutcome outcome) {
    outcomes.add(new Outcome(partition, offset, epoch, outcome));
  }

  @Override
  public void backingOff(int failuresInARow, Duration delay, OwnerEvents.BackoffCause cause) {
    backoffs.add(delay);
    backedOff.countDown();
  }
}
