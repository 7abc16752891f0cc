package dev.nolock.shedlock;

import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.List;
import java.util.Optional;
import net.javacrumbs.shedlock.core.LockProvider;
import org.junit.jupiter.api.Test;

/**
 * The negative control of the contract's mutual-exclusion test: the same scenario and assertion on
 * a provider that grants every call must fail, or the test could pass with the protection off.
 */
class ConcurrentHoldersCatchesAnAlwaysGrantingProviderTest {

  @Test
  void anAlwaysGrantingProviderFailsTheMutualExclusionAssertion() throws Exception {
    LockProvider alwaysGrants = configuration -> Optional.of(() -> {});

    ConcurrentHolders.Result result =
        ConcurrentHolders.run(List.of(alwaysGrants, alwaysGrants), "job", 6, 20);

    assertThatThrownBy(() -> ConcurrentHolders.assertMutualExclusion(result, 20))
        .isInstanceOf(AssertionError.class)
        .hasMessageContaining("most holders at once");
  }
}
