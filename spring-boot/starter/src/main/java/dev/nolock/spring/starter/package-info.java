/**
 * The nolock starter for Spring Boot holds no code: it brings nolock's auto-configuration ({@code
 * nolock-spring-boot-autoconfigure}) and Spring's JDBC support. Add the nolock patterns the
 * application uses beside it ({@code nolock-skip-locked-queue}, {@code nolock-fenced-lock-redis},
 * ...); each pattern's auto-configuration runs when its artifact is on the classpath.
 *
 * <p>This package exists so that the starter, like every published artifact, ships a class, a
 * sources jar and a Javadoc jar.
 */
package dev.nolock.spring.starter;
