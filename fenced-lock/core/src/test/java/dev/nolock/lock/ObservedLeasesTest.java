package dev.nolock.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.nolock.patterns.Deadline;
import dev.nolock.patterns.ManualLeaseClock;
import java.time.Duration;
import org.junit.jupiter.api.Test;

class ObservedLeasesTest {

  private static final Duration STORED = Duration.ofSeconds(10);
  private static final Duration ONE_NANO = Duration.ofNanos(1);

  // Near the counter's overflow: the arithmetic must only ever use differences of readings.
  private final ManualLeaseClock clock = new ManualLeaseClock(Long.MAX_VALUE - 5_000_000_000L);
  private final ObservedLeases leases = new ObservedLeases(clock);

  @Test
  void aContenderCannotTakeOverBeforeTheStoredDurationHasPassedOnItsOwnClock() {
    Deadline first = leases.observe("orders", "v1", STORED, clock.nanoTime());
    assertThat(first.hasExpired()).isFalse();
    assertThat(first.remaining()).isEqualTo(STORED);

    clock.advance(STORED.minus(ONE_NANO));
    Deadline again = leases.observe("orders", "v1", STORED, clock.nanoTime());

    assertThat(again.hasExpired()).as("one nanosecond before the stored duration").isFalse();
    assertThat(again.remaining()).isEqualTo(ONE_NANO);
  }

  @Test
  void aContenderMayTakeOverOnceItHasSeenTheSameVersionForTheStoredDuration() {
    leases.observe("orders", "v1", STORED, clock.nanoTime());
    clock.advance(STORED);

    Deadline watched = leases.observe("orders", "v1", STORED, clock.nanoTime());

    assertThat(watched.hasExpired()).isTrue();
    assertThat(watched.remaining()).isZero();
  }

  @Test
  void theFirstReadOfAHeldLeaseNeverFindsItExpiredHoweverLongAgoItWasWritten() {
    clock.advance(Duration.ofDays(1));

    assertThat(leases.observe("orders", "v1", STORED, clock.nanoTime()).hasExpired()).isFalse();
  }

  @Test
  void aHeartbeatRestartsTheWatch() {
    leases.observe("orders", "v1", STORED, clock.nanoTime());
    clock.advance(STORED.minus(Duration.ofSeconds(1)));
    leases.observe("orders", "v2", STORED, clock.nanoTime()); // the holder wrote a new version
    clock.advance(Duration.ofSeconds(1));

    Deadline watched = leases.observe("orders", "v2", STORED, clock.nanoTime());

    assertThat(watched.hasExpired())
        .as("v2 has been seen for 1 s only, although the lease is watched for 10 s")
        .isFalse();
    assertThat(watched.remaining()).isEqualTo(STORED.minus(Duration.ofSeconds(1)));
  }

  @Test
  void aReReadNeverPostponesTheTakeover() {
    leases.observe("orders", "v1", STORED, clock.nanoTime());
    clock.advance(Duration.ofSeconds(4));
    leases.observe("orders", "v1", STORED, clock.nanoTime());
    clock.advance(Duration.ofSeconds(6));

    assertThat(leases.observe("orders", "v1", STORED, clock.nanoTime()).hasExpired()).isTrue();
  }

  @Test
  void theDurationIsTheOneStoredWithTheVersionNotTheContendersOwn() {
    Duration storedByHolder = Duration.ofSeconds(30);
    leases.observe("orders", "v1", storedByHolder, clock.nanoTime());
    clock.advance(STORED);

    assertThat(leases.observe("orders", "v1", storedByHolder, clock.nanoTime()).remaining())
        .isEqualTo(Duration.ofSeconds(20));
  }

  @Test
  void namesAreWatchedApart() {
    leases.observe("orders", "v1", STORED, clock.nanoTime());
    clock.advance(STORED);

    assertThat(leases.observe("invoices", "v1", STORED, clock.nanoTime()).hasExpired()).isFalse();
    assertThat(leases.observe("orders", "v1", STORED, clock.nanoTime()).hasExpired()).isTrue();
  }

  @Test
  void aVersionThisInstanceWroteCountsFromItsHolderDeadline() {
    long sent = clock.nanoTime();
    clock.advance(Duration.ofSeconds(2)); // the write's round trip
    leases.wrote("orders", "mine", Deadline.forHolder(clock, sent, STORED));
    clock.advance(Duration.ofSeconds(7));

    Deadline before = leases.observe("orders", "mine", STORED, clock.nanoTime());
    assertThat(before.remaining()).isEqualTo(Duration.ofSeconds(1));

    clock.advance(Duration.ofSeconds(1));
    assertThat(leases.observe("orders", "mine", STORED, clock.nanoTime()).hasExpired()).isTrue();
  }

  @Test
  void afterForgetTheNextHeldVersionIsWatchedFromTheStart() {
    leases.observe("orders", "v1", STORED, clock.nanoTime());
    clock.advance(STORED);
    leases.forget("orders");

    assertThat(leases.size()).isZero();
    assertThat(leases.observe("orders", "v1", STORED, clock.nanoTime()).hasExpired()).isFalse();
  }

  @Test
  void expiredWatchesArePrunedOnlyAboveTheBound() {
    for (int i = 0; i <= ObservedLeases.PRUNE_ABOVE; i++) {
      leases.observe("lock-" + i, "v", STORED, clock.nanoTime());
    }
    clock.advance(STORED);
    leases.observe("fresh", "v", STORED, clock.nanoTime());

    assertThat(leases.size()).isEqualTo(1);
  }

  @Test
  void aStoredDurationThatIsNoLeaseIsRefusedWithTheFix() {
    assertThatThrownBy(() -> leases.observe("orders", "v1", Duration.ZERO, clock.nanoTime()))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("must be positive");
  }
}
