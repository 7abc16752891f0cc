package dev.nolock.spring.lock;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.nolock.lock.HeldLock;
import dev.nolock.lock.postgres.PostgresLockBackend;
import dev.nolock.patterns.FencingToken;
import dev.nolock.spring.Leaders;
import dev.nolock.spring.LeadershipListener;
import dev.nolock.spring.autoconfigure.NolockLeaderAutoConfiguration;
import dev.nolock.spring.autoconfigure.NolockLockAutoConfiguration;
import dev.nolock.testkit.PostgresExtension;
import dev.nolock.testkit.PostgresSchema;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.jdbc.autoconfigure.DataSourceAutoConfiguration;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.context.ConfigurableApplicationContext;

/**
 * Two instances (two contexts) on one election over PostgreSQL: one leads at a time, closing the
 * leader's context hands leadership to the other with a higher token, listeners hear it in order,
 * and leader-only work runs only on the leader.
 */
@ExtendWith(PostgresExtension.class)
class LeaderElectionIT {

  /** What every listener of both instances heard, in order. */
  private static final List<String> EVENTS = new CopyOnWriteArrayList<>();

  private final PostgresSchema schema;

  LeaderElectionIT(PostgresSchema schema) {
    this.schema = schema;
  }

  @BeforeEach
  void table() {
    PostgresLockBackend.create(schema.dataSource()).createTableIfMissing();
    EVENTS.clear();
  }

  private ApplicationContextRunner instance(String id) {
    return new ApplicationContextRunner()
        .withConfiguration(
            AutoConfigurations.of(
                DataSourceAutoConfiguration.class,
                NolockLockAutoConfiguration.class,
                NolockLeaderAutoConfiguration.class))
        .withBean("recorder", LeadershipListener.class, () -> new Recorder(id))
        .withPropertyValues(
            "spring.datasource.url=" + schema.jdbcUrl(),
            "nolock.lock.backend=postgres",
            "nolock.lock.purpose=correctness",
            "nolock.leader.elections.billing.lease-duration=3s",
            "nolock.leader.elections.billing.renew-deadline=2s",
            "nolock.leader.elections.billing.retry-period=200ms",
            "nolock.leader.elections.billing.work-stop-timeout=2s",
            // A loss here would halt the test JVM; the test closes, it never loses.
            "nolock.leader.elections.billing.halt-on-loss=false");
  }

  @Test
  void oneLeadsAtATimeAndClosingTheLeaderHandsLeadershipOver() {
    instance("a")
        .run(
            a ->
                instance("b")
                    .run(
                        b -> {
                          assertThat(a).hasNotFailed();
                          assertThat(b).hasNotFailed();
                          Leaders leadersA = a.getBean(Leaders.class);
                          Leaders leadersB = b.getBean(Leaders.class);
                          await()
                              .atMost(Duration.ofSeconds(20))
                              .until(
                                  () ->
                                      leadersA.isLeader("billing") || leadersB.isLeader("billing"));
                          boolean aLeads = leadersA.isLeader("billing");
                          ConfigurableApplicationContext leader = aLeads ? a : b;
                          Leaders leading = aLeads ? leadersA : leadersB;
                          Leaders following = aLeads ? leadersB : leadersA;
                          String leaderId = aLeads ? "a" : "b";
                          String followerId = aLeads ? "b" : "a";

                          assertThat(following.isLeader("billing")).isFalse();
                          assertThat(following.runIfLeader("billing", term -> "ran")).isEmpty();
                          long firstToken =
                              leading.runIfLeader("billing", term -> term.token().value()).get();
                          await()
                              .atMost(Duration.ofSeconds(20))
                              .untilAsserted(
                                  () ->
                                      assertThat(EVENTS)
                                          .containsExactly(
                                              "started " + leaderId + " " + firstToken));

                          leader.close();

                          await()
                              .atMost(Duration.ofSeconds(20))
                              .until(() -> following.isLeader("billing"));
                          long secondToken =
                              following.runIfLeader("billing", term -> term.token().value()).get();
                          assertThat(secondToken).isGreaterThan(firstToken);
                          await()
                              .atMost(Duration.ofSeconds(20))
                              .untilAsserted(
                                  () ->
                                      assertThat(EVENTS)
                                          .containsExactly(
                                              "started " + leaderId + " " + firstToken,
                                              "stopped " + leaderId + " " + firstToken,
                                              "started " + followerId + " " + secondToken));
                        }));
  }

  /** Records each call it hears, with the term's token. */
  private record Recorder(String id) implements LeadershipListener {
    @Override
    public String election() {
      return "billing";
    }

    @Override
    public void startedLeading(HeldLock term) {
      EVENTS.add("started " + id + " " + term.token().value());
    }

    @Override
    public void stoppedLeading(FencingToken token) {
      EVENTS.add("stopped " + id + " " + token.value());
    }
  }
}
