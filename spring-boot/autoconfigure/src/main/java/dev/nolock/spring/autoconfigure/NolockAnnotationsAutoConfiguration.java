package dev.nolock.spring.autoconfigure;

import dev.nolock.spring.internal.InactiveAnnotations;
import org.springframework.boot.autoconfigure.AutoConfiguration;
import org.springframework.context.annotation.Bean;

/**
 * Always active: fails start-up when a starter annotation ({@code @Idempotent}, {@code
 * FencedScheduled}, {@code @PartitionHandler}, {@code @JobHandler}) or a {@code LeadershipListener}
 * is used but its auto-configuration did not run, naming the bean and method and what it needs,
 * instead of letting it never run or run unprotected.
 */
@AutoConfiguration
public class NolockAnnotationsAutoConfiguration {

  /** The check, once every singleton exists. */
  @Bean
  public static InactiveAnnotations nolockInactiveAnnotations() {
    return new InactiveAnnotations();
  }
}
