package dev.nolock.queue;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import org.assertj.core.api.ThrowableAssert.ThrowingCallable;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.postgresql.ds.PGSimpleDataSource;

/**
 * A null passed to any public builder or configuration method is a configuration error: an {@link
 * IllegalArgumentException} whose message names what to pass, never a {@link NullPointerException}.
 */
class NullConfigArgumentsTest {

  @TestFactory
  Iterable<DynamicTest> everyNullConfigurationArgumentIsAnIllegalArgument() {
    Map<String, ThrowingCallable> calls = new LinkedHashMap<>();
    QueueConfig.Builder q = QueueConfig.custom("q");
    calls.put("QueueConfig.custom(null)", () -> QueueConfig.custom(null));
    calls.put("QueueConfig.ofDefaults(null)", () -> QueueConfig.ofDefaults(null));
    calls.put("table(null)", () -> q.table(null));
    calls.put("channel(null)", () -> q.channel(null));
    calls.put("lease(null)", () -> q.lease(null));
    calls.put("backoff(null, max)", () -> q.backoff(null, Duration.ofSeconds(1)));
    calls.put("backoff(base, null)", () -> q.backoff(Duration.ofSeconds(1), null));
    calls.put("queryTimeout(null)", () -> q.queryTimeout(null));
    calls.put("gaugeRefresh(null)", () -> q.gaugeRefresh(null));
    calls.put("metrics(null, name)", () -> q.metrics(null, "orders"));
    calls.put("metrics(registry, null)", () -> q.metrics(new SimpleMeterRegistry(), null));
    calls.put("clock(null)", () -> q.clock(null));
    calls.put("errorDescriber(null)", () -> q.errorDescriber(null));

    WorkerConfig.Builder w = WorkerConfig.custom();
    calls.put("pollInterval(null)", () -> w.pollInterval(null));
    calls.put("listenDataSource(null)", () -> w.listenDataSource(null));
    calls.put("selfTestTimeout(null)", () -> w.selfTestTimeout(null));
    calls.put("heartbeatInterval(null)", () -> w.heartbeatInterval(null));
    calls.put("reapInterval(null)", () -> w.reapInterval(null));
    calls.put("vacuumInterval(null)", () -> w.vacuumInterval(null));
    calls.put("shutdownTimeout(null)", () -> w.shutdownTimeout(null));

    NewJob<String> job = NewJob.of("p");
    calls.put("NewJob.of(null)", () -> NewJob.of(null));
    calls.put("runAt(null)", () -> job.runAt(null));
    calls.put("delay(null)", () -> job.delay(null));
    calls.put("uniqueKey(null)", () -> job.uniqueKey(null));

    calls.put("PayloadCodec.of(null, decode)", () -> PayloadCodec.of(null, b -> "x"));
    calls.put("PayloadCodec.of(encode, null)", () -> PayloadCodec.of(s -> new byte[0], null));

    PGSimpleDataSource pool = new PGSimpleDataSource();
    QueueConfig config = QueueConfig.ofDefaults("q");
    calls.put(
        "JobQueue.create(null, config, codec)",
        () -> JobQueue.create(null, config, PayloadCodec.utf8()));
    calls.put(
        "JobQueue.create(pool, null, codec)",
        () -> JobQueue.create(pool, null, PayloadCodec.utf8()));
    calls.put("JobQueue.create(pool, config, null)", () -> JobQueue.create(pool, config, null));

    return calls.entrySet().stream()
        .map(
            call ->
                DynamicTest.dynamicTest(
                    call.getKey(),
                    () ->
                        assertThatThrownBy(call.getValue())
                            .as(call.getKey())
                            .isExactlyInstanceOf(IllegalArgumentException.class)
                            .message()
                            .isNotBlank()))
        .toList();
  }
}
