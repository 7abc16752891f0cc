package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class GrantOwnerTest {

  @Test
  void eachGrantOfOneProcessGetsItsOwnIdentity() {
    String first = GrantOwner.newGrant("billing-7");
    String second = GrantOwner.newGrant("billing-7");

    assertThat(first)
        .isNotEqualTo(second)
        .startsWith("billing-7#")
        .hasSize("billing-7#".length() + 16);
    assertThat(GrantOwner.processOf(first)).isEqualTo("billing-7");
    assertThat(GrantOwner.processOf(second)).isEqualTo("billing-7");
  }

  @Test
  void anOwnerWithoutANonceIsItsOwnProcess() {
    assertThat(GrantOwner.processOf("billing-7")).isEqualTo("billing-7");
    assertThat(GrantOwner.processOf("a#b")).isEqualTo("a#b");
    assertThat(GrantOwner.processOf("a#zzzzzzzzzzzzzzzz")).isEqualTo("a#zzzzzzzzzzzzzzzz");
  }

  @Test
  void theLongestProcessOwnerStillFitsAStoredOwner() {
    String longest = "o".repeat(GrantOwner.MAX_PROCESS_OWNER_LENGTH);

    assertThat(GrantOwner.newGrant(longest)).hasSize(Lease.MAX_OWNER_LENGTH);
    assertThatThrownBy(() -> GrantOwner.requireProcessOwner("lock owner", longest + "o"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("239 characters long, more than 238")
        .hasMessageContaining("16-digit nonce")
        .hasMessageContaining("shorten it");
    assertThatThrownBy(() -> GrantOwner.requireProcessOwner("lock owner", " "))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("blank");
  }
}
