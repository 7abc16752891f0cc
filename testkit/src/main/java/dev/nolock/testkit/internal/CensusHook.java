package dev.nolock.testkit.internal;

import dev.nolock.testkit.ActionCensus;
import net.jqwik.api.lifecycle.AroundPropertyHook;
import net.jqwik.api.lifecycle.PropertyExecutionResult;
import net.jqwik.api.lifecycle.PropertyExecutor;
import net.jqwik.api.lifecycle.PropertyLifecycleContext;

/**
 * Around a stateful property of testkit: sets its tries from {@link ActionCensus#tries(int)},
 * starts a fresh census, and after the run prints the census and fails a green run whose census is
 * below its floor. Used through {@code @AddLifecycleHook(CensusHook.class)} on a property whose
 * container implements {@link Censused}.
 */
public final class CensusHook implements AroundPropertyHook {

  /** What a property container gives the hook. */
  public interface Censused {
    /** Tries when {@value ActionCensus#TRIES_PROPERTY} is not set. */
    int defaultTries();

    /** A new census for one property run; the container counts into it. */
    ActionCensus startCensus();
  }

  @Override
  public PropertyExecutionResult aroundProperty(
      PropertyLifecycleContext context, PropertyExecutor property) {
    if (!(context.testInstance() instanceof Censused censused)) {
      return property.execute();
    }
    context.attributes().setTries(ActionCensus.tries(censused.defaultTries()));
    ActionCensus census = censused.startCensus();
    PropertyExecutionResult result = property.execute();
    System.out.println(
        "Action census of "
            + context.containerClass().getSimpleName()
            + "."
            + context.targetMethod().getName()
            + " ("
            + result.countTries()
            + " tries, "
            + result.status()
            + "):\n"
            + census.report());
    if (result.status() == PropertyExecutionResult.Status.SUCCESSFUL) {
      try {
        census.check();
      } catch (AssertionError belowFloor) {
        return result.mapToFailed(belowFloor);
      }
    }
    return result;
  }
}
