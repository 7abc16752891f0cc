package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

class RenewalSchedulerTest {

  @Test
  void itsThreadIsANamedDaemon() throws Exception {
    AtomicReference<Thread> ran = new AtomicReference<>();
    CountDownLatch done = new CountDownLatch(1);
    try (RenewalScheduler scheduler = RenewalScheduler.named("nolock-test-renewal")) {
      scheduler.once(
          () -> {
            ran.set(Thread.currentThread());
            done.countDown();
          },
          Duration.ZERO);
      assertThat(done.await(30, TimeUnit.SECONDS)).isTrue();
    }
    assertThat(ran.get().getName()).isEqualTo("nolock-test-renewal");
    assertThat(ran.get().isDaemon()).isTrue();
  }

  @Test
  void aRepeatingTaskThatThrowsKeepsItsSchedule() throws Exception {
    CountDownLatch runs = new CountDownLatch(3);
    try (RenewalScheduler scheduler = RenewalScheduler.named("nolock-test-renewal")) {
      scheduler.repeat(
          () -> {
            runs.countDown();
            throw new IllegalStateException("the backend is down");
          },
          Duration.ofMillis(1));
      assertThat(runs.await(30, TimeUnit.SECONDS)).as("ran again after throwing").isTrue();
    }
  }

  @Test
  void aCancelledTaskLeavesTheQueueAtOnce() {
    try (RenewalScheduler scheduler = RenewalScheduler.named("nolock-test-renewal")) {
      ScheduledFuture<?> renewal = scheduler.repeat(() -> {}, Duration.ofHours(1));
      ScheduledFuture<?> watch = scheduler.once(() -> {}, Duration.ofHours(1));
      assertThat(scheduler.queued()).isEqualTo(2);

      renewal.cancel(false);
      watch.cancel(false);

      assertThat(scheduler.queued()).isZero();
    }
  }

  @Test
  void afterCloseNothingIsScheduledAndARunningTaskIsInterrupted() throws Exception {
    CountDownLatch started = new CountDownLatch(1);
    CountDownLatch interrupted = new CountDownLatch(1);
    RenewalScheduler scheduler = RenewalScheduler.named("nolock-test-renewal");
    scheduler.once(
        () -> {
          started.countDown();
          try {
            new CountDownLatch(1).await();
          } catch (InterruptedException e) {
            interrupted.countDown();
          }
        },
        Duration.ZERO);
    assertThat(started.await(30, TimeUnit.SECONDS)).isTrue();

    scheduler.close();

    assertThat(interrupted.await(30, TimeUnit.SECONDS)).isTrue();
    assertThatThrownBy(() -> scheduler.once(() -> {}, Duration.ZERO))
        .isInstanceOf(RejectedExecutionException.class);
    assertThatThrownBy(() -> scheduler.repeat(() -> {}, Duration.ofSeconds(1)))
        .isInstanceOf(RejectedExecutionException.class);
  }

  @Test
  void badArgumentsSayHowToFixTheCall() {
    assertThatThrownBy(() -> RenewalScheduler.named(" "))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("thread name");
    try (RenewalScheduler scheduler = RenewalScheduler.named("nolock-test-renewal")) {
      assertThatThrownBy(() -> scheduler.repeat(() -> {}, Duration.ZERO))
          .isInstanceOf(IllegalArgumentException.class)
          .hasMessageContaining("positive");
      assertThatThrownBy(() -> scheduler.once(null, Duration.ZERO))
          .isInstanceOf(IllegalArgumentException.class);
    }
  }
}
