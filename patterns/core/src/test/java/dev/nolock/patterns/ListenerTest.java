package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.vavr.control.Option;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class ListenerTest {

  @AfterEach
  void clearTheFlag() {
    Thread.interrupted(); // a failed assertion must not leave it to the next test
  }

  @Test
  void aHookThatReturnsIsToldAndNothingIsReturned() {
    List<String> told = new ArrayList<>();

    assertThat(Listener.tell(told::add, "lease lost")).isEmpty();

    assertThat(told).containsExactly("lease lost");
    assertThat(Thread.currentThread().isInterrupted()).isFalse();
  }

  @Test
  void whatTheHookThrowsCheckedOrNotIsReturnedForTheCallerToLog() {
    IOException checked = new IOException("the pager is down");
    IllegalStateException unchecked = new IllegalStateException("the dashboard is down");

    assertThat(Listener.tell(event -> throwIt(checked), "x").get()).isSameAs(checked);
    assertThat(Listener.tell(event -> throwIt(unchecked), "x").get()).isSameAs(unchecked);
    assertThat(Thread.currentThread().isInterrupted()).as("no interrupt was involved").isFalse();
  }

  /**
   * The hook's wait was interrupted: the exception cleared the flag, and the thread's loop would
   * never learn of the interrupt. The flag is set again, and the exception still returned.
   */
  @Test
  void anInterruptedHookLeavesTheThreadWithItsInterruptFlagSet() {
    CountDownLatch never = new CountDownLatch(1);
    Thread.currentThread().interrupt(); // the shutdown, arriving while the hook waits

    Option<Exception> threw = Listener.tell(event -> never.await(), "x");

    assertThat(threw.get()).isInstanceOf(InterruptedException.class);
    assertThat(Thread.interrupted()).as("the flag, set again").isTrue();
  }

  @Test
  void aHookThatThrowsInterruptedExceptionItselfSetsTheFlagToo() {
    Option<Exception> threw =
        Listener.tell(
            event -> {
              throw new InterruptedException("told to stop");
            },
            "x");

    assertThat(threw.get()).isInstanceOf(InterruptedException.class);
    assertThat(Thread.interrupted()).isTrue();
  }

  @Test
  void anErrorIsNotCaught() {
    assertThatThrownBy(
            () ->
                Listener.tell(
                    event -> {
                      throw new OutOfMemoryError("test");
                    },
                    "x"))
        .isInstanceOf(OutOfMemoryError.class);
  }

  @Test
  void aNullListenerIsRefusedSayingSo() {
    assertThatThrownBy(() -> Listener.tell(null, "x"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("null");
  }

  private static void throwIt(Exception e) throws Exception {
    throw e;
  }
}
