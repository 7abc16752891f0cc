package dev.nolock.spring;

import java.lang.annotation.Documented;
import java.lang.annotation.ElementType;
import java.lang.annotation.Retention;
import java.lang.annotation.RetentionPolicy;
import java.lang.annotation.Target;

/**
 * Applies every record of the partitions this instance owns, for the owner declared under {@code
 * nolock.ownership.owners.<value>.*}, through a {@link dev.nolock.ownership.PartitionOwner} the
 * starter starts after the context is refreshed and closes before the {@code DataSource} closes.
 *
 * <p>The method runs inside the record's apply transaction, the one that checks the partition's
 * owner epoch and advances its applied offset: Spring data access in it ({@code JdbcTemplate}, jOOQ
 * through Spring) writes in that transaction, so a record's change commits once, in offset order,
 * and never under an epoch that has moved on. Parameters: the record, {@code ConsumerRecord<K, V>}
 * with {@code K} and {@code V} each {@code String} (UTF-8) or {@code byte[]}, then optionally the
 * {@link dev.nolock.patterns.FencingToken} of the owner epoch, for writes to other systems.
 * Throwing rolls the record's transaction back and stops the owner (see the partitioned-ownership
 * README's error handling).
 *
 * <p>Start-up fails, naming the bean and method, when the owner is not declared, when two methods
 * name one owner, or when the signature does not fit; and naming the owner when a declared owner
 * has no handler.
 */
@Target(ElementType.METHOD)
@Retention(RetentionPolicy.RUNTIME)
@Documented
public @interface PartitionHandler {

  /** The owner's name, as in {@code nolock.ownership.owners.<name>.*}. */
  String value();
}
