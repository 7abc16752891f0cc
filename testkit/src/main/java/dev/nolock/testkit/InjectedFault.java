package dev.nolock.testkit;

/**
 * One fault armed on an injector ({@link JdbcFaults}, {@link TcpProxy#loseNext}, the AWS SDK
 * client of {@code DynamoDbFaults}): it fires once, on the first request it matches.
 *
 * <p>A fault test asserts {@link #assertFired()}: a test whose fault never happened proves
 * nothing, however green it is.
 */
public interface InjectedFault {

  /** True once the fault has fired. */
  boolean fired();

  /**
   * Fails (with an {@link AssertionError} that names the fault) unless it fired.
   *
   * @throws AssertionError when the armed request was never sent
   */
  default void assertFired() {
    if (!fired()) {
      throw new AssertionError(
          this + " never fired: the request it was armed for was not sent, so the test proved"
              + " nothing. Check the matcher and that the call under test goes through the"
              + " injector.");
    }
  }
}
