package dev.nolock.testkit;

/** Whether a scenario's writes go through the fence, or around it for the negative control. */
public enum Protection {
  /** Every protected write carries its token to a resource that checks it. */
  FENCED,
  /** The same writes without the check: the negative control that a test must catch. */
  UNFENCED
}
