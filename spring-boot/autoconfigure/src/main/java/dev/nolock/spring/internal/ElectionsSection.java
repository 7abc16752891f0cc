package dev.nolock.spring.internal;

/**
 * The {@code elections} section of the {@code nolock} endpoint: per declared election, whether its
 * elector runs, whether this instance leads with its term's token, and the lease's holder according
 * to the backend. A term this instance leads is the lock it holds for that election.
 */
public final class ElectionsSection implements NolockSection {

  private final Elections elections;

  public ElectionsSection(Elections elections) {
    this.elections = elections;
  }

  @Override
  public String name() {
    return "elections";
  }

  @Override
  public Object report() {
    return elections.states();
  }
}
