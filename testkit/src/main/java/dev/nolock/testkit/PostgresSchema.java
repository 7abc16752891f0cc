package dev.nolock.testkit;

import javax.sql.DataSource;
import org.jooq.DSLContext;

/**
 * A fresh, empty PostgreSQL schema that belongs to one test class, made by {@link
 * PostgresExtension}.
 *
 * <p>Guarantees: the schema did not exist before the class started (its name is random, {@code
 * nolock_t_} and 12 hex digits); every connection from {@link #jdbcUrl()}, {@link #dataSource()}
 * and {@link #dsl()} has it as its only {@code search_path} entry, so unqualified tables are
 * created and found there and nowhere else; after the class the pool is closed and the schema is
 * dropped with {@code CASCADE}.
 */
public final class PostgresSchema {

  private final String schemaName;
  private final String jdbcUrl;
  private final DataSource dataSource;
  private final DSLContext dsl;

  PostgresSchema(String schemaName, String jdbcUrl, DataSource dataSource, DSLContext dsl) {
    this.schemaName = schemaName;
    this.jdbcUrl = jdbcUrl;
    this.dataSource = dataSource;
    this.dsl = dsl;
  }

  /** The schema's name, safe to put in SQL unquoted: lowercase letters, digits and underscores. */
  public String schemaName() {
    return schemaName;
  }

  /**
   * A pgjdbc URL whose connections use this schema ({@code currentSchema=} set), for code that
   * opens its own connections or pools; close what you open.
   */
  public String jdbcUrl() {
    return jdbcUrl;
  }

  /**
   * A small HikariCP pool (at most 8 connections) on {@link #jdbcUrl()}, closed after the class.
   */
  public DataSource dataSource() {
    return dataSource;
  }

  /** jOOQ with {@code SQLDialect.POSTGRES} over {@link #dataSource()}. */
  public DSLContext dsl() {
    return dsl;
  }

  @Override
  public String toString() {
    return "PostgresSchema[" + schemaName + "]";
  }
}
