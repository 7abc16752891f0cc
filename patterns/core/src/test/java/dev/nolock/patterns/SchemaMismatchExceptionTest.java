package dev.nolock.patterns;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;

class SchemaMismatchExceptionTest {

  private static final List<String> DDL =
      List.of(
          "create table if not exists runs (job varchar(255) not null, attempt bigint not null)",
          "create index if not exists runs_idx on runs (job)");

  @Test
  void carriesTheTableTheProblemAndTheDdlThatFitsWhichTheMessageContains() {
    SchemaMismatchException e =
        new SchemaMismatchException("app.runs", "column attempt is missing", DDL);

    assertThat(e).isInstanceOf(CoordinationException.class);
    assertThat(e.table()).isEqualTo("app.runs");
    assertThat(e.problem()).isEqualTo("column attempt is missing");
    assertThat(e.ddl()).isEqualTo(DDL);
    assertThat(e.getMessage())
        .contains("app.runs")
        .contains("column attempt is missing")
        .contains(DDL.get(0) + ";")
        .contains(DDL.get(1) + ";");
  }

  @Test
  void theDdlIsACopy() {
    List<String> ddl = new ArrayList<>(DDL);
    SchemaMismatchException e = new SchemaMismatchException("runs", "column job is missing", ddl);
    ddl.clear();

    assertThat(e.ddl()).isEqualTo(DDL);
    assertThatThrownBy(() -> e.ddl().add("drop table runs"))
        .isInstanceOf(UnsupportedOperationException.class);
  }

  @Test
  void missingValuesAreRefusedWithIllegalArgument() {
    assertThatThrownBy(() -> new SchemaMismatchException(null, "p", DDL))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("table name");
    assertThatThrownBy(() -> new SchemaMismatchException(" ", "p", DDL))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new SchemaMismatchException("runs", null, DDL))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("what is wrong");
    assertThatThrownBy(() -> new SchemaMismatchException("runs", "p", null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("DDL");
    assertThatThrownBy(() -> new SchemaMismatchException("runs", "p", List.of()))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> new SchemaMismatchException("runs", "p", List.of(" ")))
        .isInstanceOf(IllegalArgumentException.class);
  }
}
