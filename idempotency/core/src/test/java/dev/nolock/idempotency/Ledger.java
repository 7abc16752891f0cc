package dev.nolock.idempotency;

import static org.jooq.impl.DSL.field;
import static org.jooq.impl.DSL.name;
import static org.jooq.impl.DSL.table;

import java.util.List;
import org.jooq.DSLContext;
import org.jooq.Field;
import org.jooq.Table;

/**
 * The side effect the tests count: one row per effect. It has <b>no unique key</b> on the
 * idempotency key (nor on anything else but a serial id), so a duplicate effect shows up as a
 * second row instead of being absorbed by a constraint.
 */
final class Ledger {

  static final Table<?> TABLE = table(name("ledger"));
  static final Field<String> SCOPE = field(name("scope"), String.class);
  static final Field<String> KEY = field(name("idem_key"), String.class);
  static final Field<String> STEP = field(name("step"), String.class);
  static final Field<Long> ATTEMPT = field(name("attempt"), Long.class);

  /** One ledger row as the tests read it back. */
  record Row(String step, long attempt) {}

  private Ledger() {}

  static void create(DSLContext dsl) {
    dsl.execute(
        "CREATE TABLE IF NOT EXISTS ledger (id bigserial PRIMARY KEY, scope text NOT NULL,"
            + " idem_key text NOT NULL, step text NOT NULL, attempt bigint NOT NULL)");
  }

  /** The effect: a row written through the attempt's transaction. */
  static void write(Attempt attempt, String step) {
    attempt
        .dsl()
        .insertInto(TABLE, SCOPE, KEY, STEP, ATTEMPT)
        .values(attempt.scope(), attempt.key(), step, attempt.token().value())
        .execute();
  }

  static int count(DSLContext dsl, String scope, String key) {
    return dsl.fetchCount(TABLE, SCOPE.eq(scope).and(KEY.eq(key)));
  }

  static List<Row> rows(DSLContext dsl, String scope, String key) {
    return dsl.select(STEP, ATTEMPT)
        .from(TABLE)
        .where(SCOPE.eq(scope).and(KEY.eq(key)))
        .orderBy(field(name("id")))
        .fetch(r -> new Row(r.value1(), r.value2()));
  }
}
