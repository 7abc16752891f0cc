package dev.nolock.patterns.sql;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

class SqlNamesTest {

  @ParameterizedTest
  @ValueSource(strings = {"nolock_fences", "app.nolock_fences", "_t1"})
  void plainSqlIdentifiersPass(String identifier) {
    assertThat(SqlNames.requireSqlIdentifier("fence table", identifier).toString()).isNotEmpty();
  }

  @ParameterizedTest
  @ValueSource(
      strings = {
        "fences; drop table users",
        "Fences",
        "a.b.c",
        "1table",
        "fen\"ces",
        ".fences",
        "fences."
      })
  void anythingElseIsRefused(String identifier) {
    assertThatThrownBy(() -> SqlNames.requireSqlIdentifier("fence table", identifier))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("fence table");
  }

  @Test
  void identifiersLongerThanPostgresKeepsAreRefused() {
    assertThatThrownBy(() -> SqlNames.requireSqlIdentifier("fence table", "t".repeat(64)))
        .hasMessageContaining("at most 63");
  }
}
