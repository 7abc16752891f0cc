package dev.nolock.testkit.internal;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

class SimpleQueryClientTest {

  @Test
  void md5PasswordMatchesPostgresFormula() {
    // md5(md5(password || user) || salt), from PostgreSQL's documentation of
    // AuthenticationMD5Password;
    // expected value computed independently with: printf '%s' "$(printf 'secretalice' | md5sum |
    // cut -c1-32)abcd" | md5sum
    String hashed = SimpleQueryClient.md5Password("alice", "secret", "abcd".getBytes(UTF_8));

    assertThat(hashed).isEqualTo("md5c90bcafc0a2b54511742383e34d5dc9d");
  }
}
