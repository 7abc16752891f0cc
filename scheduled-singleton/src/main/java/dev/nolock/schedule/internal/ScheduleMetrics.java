package dev.nolock.schedule.internal;

import dev.nolock.patterns.CoordinationMetrics;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.micrometer.core.instrument.Timer;
import io.micrometer.core.instrument.composite.CompositeMeterRegistry;
import java.time.Duration;

/**
 * The meters of one scheduled job on one instance, tagged {@code component="schedule"} and {@code
 * name=<instance name>} like every nolock component, and the schedule's own meters also {@code
 * job=<job>} (the job, never a scheduled time). Besides its own counters it feeds the shared {@link
 * CoordinationMetrics}: a lost claim is a conflict, a refused stale finish a fence rejection, the
 * run time the time held, and the lease renewals their usual counters.
 */
public final class ScheduleMetrics {

  public static final String COMPONENT = "schedule";

  /** The tag of the schedule's own meters that names the job. */
  public static final String JOB_TAG = "job";

  private final CoordinationMetrics coordination;
  private final Counter claimed;
  private final Counter skipped;
  private final Counter missed;
  private final Counter takenOver;
  private final Counter staleFinishes;
  private final Counter finished;
  private final Counter failures;
  private final Counter gaveUp;
  private final Counter outsideWindow;
  private final Counter superseded;
  private final Counter listenerFailures;
  private final Timer startDelay;
  private final Timer run;

  /**
   * Metrics for {@code job} in {@code registry} under {@code instanceName}, or recorded nowhere
   * when {@code registry} is null.
   */
  public ScheduleMetrics(MeterRegistry registry, String instanceName, String job) {
    MeterRegistry r = registry != null ? registry : new CompositeMeterRegistry();
    String name = registry != null ? instanceName : job;
    this.coordination = CoordinationMetrics.of(r, COMPONENT, name);
    Tags tags =
        Tags.of(
            CoordinationMetrics.COMPONENT_TAG,
            COMPONENT,
            CoordinationMetrics.NAME_TAG,
            name,
            JOB_TAG,
            job);
    this.claimed = counter(r, tags, "nolock.schedule.claimed", "Scheduled times claimed");
    this.skipped =
        counter(
            r, tags, "nolock.schedule.skipped", "Scheduled times another instance claimed first");
    this.missed =
        counter(
            r,
            tags,
            "nolock.schedule.missed",
            "Scheduled times that passed unclaimed and were not run, per the missed-schedules"
                + " policy");
    this.takenOver =
        counter(
            r,
            tags,
            "nolock.schedule.taken.over",
            "Runs claimed again after their lease expired or their job threw");
    this.staleFinishes =
        counter(
            r,
            tags,
            "nolock.schedule.stale.finishes",
            "Finishes refused because the run had been taken over");
    this.finished = counter(r, tags, "nolock.schedule.finished", "Runs finished");
    this.failures = counter(r, tags, "nolock.schedule.failures", "Attempts whose job threw");
    this.gaveUp =
        counter(
            r, tags, "nolock.schedule.gave.up", "Runs recorded failed after their last attempt");
    this.outsideWindow =
        counter(
            r,
            tags,
            "nolock.schedule.outside.window",
            "Claims the database refused because the scheduled time lay outside the claim window"
                + " around its clock (this instance's clock is off)");
    this.superseded =
        counter(
            r,
            tags,
            "nolock.schedule.superseded",
            "Claims the database refused because the job already had a run of a later time");
    this.listenerFailures =
        counter(
            r,
            tags,
            "nolock.schedule.listener.failures",
            "Outcomes whose onOutcome listener threw (logged; the loop went on)");
    this.startDelay =
        Timer.builder("nolock.schedule.start.delay")
            .description("From the scheduled time (wall clock) to its claim")
            .tags(tags)
            .register(r);
    this.run =
        Timer.builder("nolock.schedule.run")
            .description("Time one attempt of the job ran, finish included")
            .tags(tags)
            .register(r);
  }

  public void claimed(Duration delay) {
    claimed.increment();
    startDelay.record(delay.isNegative() ? Duration.ZERO : delay);
  }

  public void skipped() {
    skipped.increment();
    coordination.conflict();
  }

  public void missed(long count) {
    missed.increment(count);
  }

  public void takenOver() {
    takenOver.increment();
  }

  public void staleFinish() {
    staleFinishes.increment();
    coordination.fenceRejected();
  }

  public void finished() {
    finished.increment();
  }

  public void failed() {
    failures.increment();
  }

  public void gaveUp() {
    gaveUp.increment();
  }

  public void outsideWindow() {
    outsideWindow.increment();
  }

  public void superseded() {
    superseded.increment();
  }

  public void listenerFailed() {
    listenerFailures.increment();
  }

  public void ran(Duration time) {
    run.record(time);
    coordination.held(time);
  }

  public void renewed() {
    coordination.renewed();
  }

  public void renewalFailed() {
    coordination.renewalFailed();
  }

  public void leaseLost() {
    coordination.leaseLost();
  }

  private static Counter counter(MeterRegistry registry, Tags tags, String name, String help) {
    return Counter.builder(name).description(help).tags(tags).register(registry);
  }
}
