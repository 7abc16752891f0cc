package dev.nolock.benchmarks;

import org.openjdk.jmh.annotations.AuxCounters;
import org.openjdk.jmh.annotations.Level;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;

/**
 * What each attempt achieved, reported by JMH as rates beside the primary score (attempts per
 * second). Every benchmark makes exactly one attempt per invocation and never retries, so the
 * designs are compared on the same footing: {@code ok} is a unit of protected work done (the figure
 * the report ranks by), {@code conflict} an attempt that lost to another thread (a CAS conflict, a
 * lock held by someone else, a duplicate in progress, an empty queue).
 */
@AuxCounters(AuxCounters.Type.OPERATIONS)
@State(Scope.Thread)
public class Outcomes {

  public long ok;
  public long conflict;

  @Setup(Level.Iteration)
  public void reset() {
    ok = 0;
    conflict = 0;
  }

  public void of(boolean done) {
    if (done) {
      ok++;
    } else {
      conflict++;
    }
  }
}
