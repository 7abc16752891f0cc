package dev.nolock.testkit;

/**
 * The two ambiguous faults of a request over a network. Both end with the caller seeing a dropped
 * connection; only the server knows which one happened, which is why a client must treat either as
 * "outcome unknown".
 */
public enum FaultKind {
  /**
   * The server received and applied the request; its answer was lost with the connection. A
   * driver or SDK that retries on a dropped connection sends the request again.
   */
  ANSWER_LOST,

  /** The connection dropped before the server saw the request: nothing was applied. */
  REQUEST_LOST
}
