package dev.nolock.patterns.sql;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.stream.Collectors;
import org.jooq.DSLContext;
import org.jooq.DataType;
import org.jooq.Field;
import org.jooq.Param;
import org.jooq.Query;
import org.jooq.QueryPart;
import org.jooq.Record;
import org.jooq.ResultQuery;
import org.jooq.impl.DSL;
import org.jooq.tools.jdbc.MockConnection;
import org.jooq.tools.jdbc.MockDataProvider;
import org.jooq.tools.jdbc.MockResult;

/**
 * A statement that jOOQ builds and renders once, then runs many times with new bind values: the
 * same SQL text, bound with the same types and read as the same fields as the statement built with
 * those values.
 *
 * <p>Why: building a statement's syntax tree and rendering it is most of the client's work per call
 * of a hot statement, and its text never changes for one shape. On the queue's claim and completion
 * (one job, one thread, measured on 2 cores) the calling thread spent about 200 µs of CPU and made
 * about 40 KB of garbage per job, against about 75 µs and 4 KB for the same statements through
 * plain JDBC; rendered once, about 130 µs and 24 KB. jOOQ's manual suggests this ("Performance
 * considerations": cache the SQL that jOOQ generates). The statement still runs through jOOQ, so
 * its settings (the query timeout), bindings and error translation apply as before; execute
 * listeners see it as a plain SQL query (a {@code RETURNING} statement counts as a read).
 *
 * <ol>
 *   <li>{@link #of}: renders the shape with the context's settings, keeps the data type of each
 *       bind value in order (inlined values are part of the text) and, for a query that returns
 *       rows, its fields; then checks that jOOQ reads the text back as the same statement: the
 *       shape's own values through the kept text must reach the driver ({@link #sent}) exactly as
 *       the shape's do, so a text in which jOOQ's plain SQL would take something for a placeholder
 *       (a brace, a colon before a name) fails here, not at a call. (A stray {@code ?} in an
 *       unquoted name, which that check cannot see, leaves a parameter unbound: the first call
 *       fails with the driver's error.) nolock quotes every name it renders. Use it on contexts of
 *       the module's own, never on a caller's: a caller's settings may render a statement in ways a
 *       kept text does not follow (static statements, raw templates, a visit listener that rewrites
 *       per call).
 *   <li>{@link #query} and {@link #fetch}: a plain SQL statement of the kept text, each value bound
 *       with its kept type (the driver sends the same parameter types as the built statement, so
 *       the server reuses the same prepared statement), rows read as the kept fields. A value of
 *       another Java type than its kept type is refused, never converted (a text where a number
 *       goes would be bound as null).
 * </ol>
 *
 * <p>What it cannot check: that a caller passes its values in the order the shape binds them. Each
 * user keeps a test that builds its statements both ways with the same values and compares what
 * they {@link #sent send}.
 */
public final class RenderedStatement {

  private final String sql;
  private final DataType<?>[] bindTypes;
  private final Field<?>[] fields;

  private RenderedStatement(String sql, DataType<?>[] bindTypes, Field<?>[] fields) {
    this.sql = sql;
    this.bindTypes = bindTypes;
    this.fields = fields;
  }

  /**
   * Renders {@code shape} with {@code renderWith}'s settings (the context the statements will run
   * on, or one with the same settings).
   *
   * @param shape the statement built with any values of the right types; those values are not kept
   * @throws IllegalArgumentException when jOOQ would not read the rendered text back as the same
   *     statement
   */
  public static RenderedStatement of(DSLContext renderWith, Query shape) {
    List<DataType<?>> types =
        shape.getParams().values().stream()
            .filter(param -> !param.isInline())
            .<DataType<?>>map(Param::getDataType)
            .toList();
    Field<?>[] fields = shape instanceof ResultQuery<?> rows ? rows.fields() : null;
    RenderedStatement rendered =
        new RenderedStatement(renderWith.render(shape), types.toArray(DataType<?>[]::new), fields);
    Object[] shapeValues =
        shape.getParams().values().stream()
            .filter(param -> !param.isInline())
            .map(Param::getValue)
            .toArray();
    String built = sent(renderWith, shape);
    String read = sent(renderWith, rendered.query(renderWith, shapeValues));
    if (!built.equals(read)) {
      throw new IllegalArgumentException(
          "jOOQ reads the rendered statement back differently (a character it takes for a bind"
              + " marker or a placeholder?); build this statement for each call instead.\n built: "
              + built
              + "\n read:  "
              + read);
    }
    return rendered;
  }

  /**
   * What the driver receives when {@code query} runs with {@code dsl}'s dialect and settings: the
   * SQL text, then each bound value with its Java type, in order (values written into the text are
   * part of it). Found by running it on jOOQ's mock connection ({@link MockConnection}, which
   * answers with no rows): {@code query} is attached to that connection's configuration, so run it
   * nowhere else afterwards. Two statements that send the same are the same statement to the driver
   * and the server; the form in which a statement run from the kept text and the built one compare.
   */
  public static String sent(DSLContext dsl, Query query) {
    List<String> seen = new ArrayList<>();
    MockDataProvider recorder =
        context -> {
          seen.add(
              context.sql()
                  + Arrays.stream(context.bindings())
                      .map(RenderedStatement::shown)
                      .collect(Collectors.joining(", ", "\n binds: [", "]")));
          return new MockResult[] {new MockResult(0, DSL.using(dsl.dialect()).newResult())};
        };
    query.attach(
        DSL.using(new MockConnection(recorder), dsl.dialect(), dsl.settings()).configuration());
    query.execute();
    return String.join("\n", seen);
  }

  private static String shown(Object value) {
    if (value == null) {
      return "null";
    }
    String shown = value instanceof byte[] bytes ? Arrays.toString(bytes) : value.toString();
    return shown + " (" + value.getClass().getSimpleName() + ")";
  }

  /** The rendered text, with a {@code ?} per bind value. */
  public String sql() {
    return sql;
  }

  /**
   * The statement with {@code values} bound in the order the shape binds them, to run on {@code on}
   * (a context of the pool, a connection or a caller's transaction).
   *
   * @throws IllegalArgumentException when the number of values is not the shape's, or a value is
   *     not of its kept type
   */
  public Query query(DSLContext on, Object... values) {
    return on.query(sql, bind(values));
  }

  /**
   * The query with {@code values} bound in the order the shape binds them, its rows read as the
   * shape's fields.
   *
   * @throws IllegalArgumentException when the number of values is not the shape's, a value is not
   *     of its kept type, or the shape returns no rows
   */
  public ResultQuery<Record> fetch(DSLContext on, Object... values) {
    if (fields == null) {
      throw new IllegalArgumentException(
          "This statement returns no rows; run it with query(...).execute(): " + sql);
    }
    return on.resultQuery(sql, bind(values)).coerce(fields);
  }

  private QueryPart[] bind(Object[] values) {
    if (values.length != bindTypes.length) {
      throw new IllegalArgumentException(
          "The statement binds "
              + bindTypes.length
              + " values, got "
              + values.length
              + " ("
              + Arrays.toString(values)
              + "): "
              + sql);
    }
    QueryPart[] bound = new QueryPart[values.length];
    for (int i = 0; i < values.length; i++) {
      bound[i] = bindAs(values[i], bindTypes[i], i);
    }
    return bound;
  }

  private <T> Param<T> bindAs(Object value, DataType<T> type, int index) {
    if (value != null && !type.getType().isInstance(value)) {
      throw new IllegalArgumentException(
          "Value "
              + (index + 1)
              + " is a "
              + value.getClass().getName()
              + " ("
              + value
              + "), where the statement binds a "
              + type.getType().getName()
              + ": pass it as that type (it is never converted): "
              + sql);
    }
    return DSL.val(type.getType().cast(value), type);
  }
}
