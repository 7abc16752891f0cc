package dev.nolock.spring.idempotency;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.spring.Idempotent;
import dev.nolock.spring.autoconfigure.NolockIdempotencyAutoConfiguration;
import dev.nolock.spring.internal.IdempotentMethods;
import javax.sql.DataSource;
import org.junit.jupiter.api.Test;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;
import org.springframework.http.ResponseEntity;
import org.springframework.jdbc.datasource.DriverManagerDataSource;
import org.springframework.transaction.annotation.Transactional;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * When idempotency keys appear, and how a misplaced {@code @Idempotent} fails start-up naming the
 * bean and method. Nothing here reaches PostgreSQL: tables are not created, and the checks run
 * before any request.
 */
class IdempotentConditionsTest {

  private final WebApplicationContextRunner web =
      new WebApplicationContextRunner()
          .withConfiguration(AutoConfigurations.of(NolockIdempotencyAutoConfiguration.class))
          .withUserConfiguration(WithDataSource.class);

  @Configuration(proxyBeanMethods = false)
  static class WithDataSource {
    @Bean
    DataSource dataSource() {
      return new DriverManagerDataSource("jdbc:postgresql://127.0.0.1:1/never-connected");
    }
  }

  @RestController
  static class Fine {
    @Idempotent
    @PostMapping("/a")
    ResponseEntity<String> create() {
      return ResponseEntity.ok("a");
    }
  }

  interface OrdersApi {
    @Idempotent
    @PostMapping("/a")
    ResponseEntity<String> create();
  }

  /** As an OpenAPI generator writes it: the annotations on the interface. */
  @RestController
  static class FromAnInterface implements OrdersApi {
    @Override
    public ResponseEntity<String> create() {
      return ResponseEntity.ok("a");
    }
  }

  @RestController
  static class ReadsTheStream {
    @Idempotent
    @PostMapping("/a")
    ResponseEntity<String> upload(java.io.InputStream body) {
      return ResponseEntity.ok("a");
    }
  }

  @RestController
  static class PrivateMethod {
    @Idempotent
    @PostMapping("/a")
    private ResponseEntity<String> create() {
      return ResponseEntity.ok("a");
    }
  }

  @RestController
  static class OnAGet {
    @Idempotent
    @GetMapping("/a")
    ResponseEntity<String> read() {
      return ResponseEntity.ok("a");
    }
  }

  @RestController
  static class EveryMethod {
    @Idempotent
    @RequestMapping("/a")
    ResponseEntity<String> any() {
      return ResponseEntity.ok("a");
    }
  }

  @RestController
  static class Transactional1 {
    @Idempotent
    @Transactional
    @PostMapping("/a")
    public ResponseEntity<String> create() {
      return ResponseEntity.ok("a");
    }
  }

  @RestController
  static class PlainBody {
    @Idempotent
    @PostMapping("/a")
    String create() {
      return "a";
    }
  }

  @RestController
  static class SameScope {
    @Idempotent(scope = "Fine.create")
    @PostMapping("/b")
    ResponseEntity<String> create() {
      return ResponseEntity.ok("b");
    }
  }

  @Test
  void withoutADataSourceThereAreNoKeys() {
    new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(NolockIdempotencyAutoConfiguration.class))
        .run(context -> assertThat(context).doesNotHaveBean(IdempotencyKeys.class));
  }

  @Test
  void outsideAWebApplicationThereAreKeysButNoMvcPart() {
    new ApplicationContextRunner()
        .withConfiguration(AutoConfigurations.of(NolockIdempotencyAutoConfiguration.class))
        .withUserConfiguration(WithDataSource.class)
        .run(
            context -> {
              assertThat(context).hasSingleBean(IdempotencyKeys.class);
              assertThat(context).doesNotHaveBean(IdempotentMethods.class);
            });
  }

  @Test
  void aWellPlacedIdempotentStartsAndIsProxied() {
    web.withBean("fine", Fine.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              assertThat(
                      org.springframework.aop.support.AopUtils.isAopProxy(context.getBean("fine")))
                  .isTrue();
            });
  }

  @Test
  void anIdempotentDeclaredOnAnInterfaceMethodIsApplied() {
    web.withBean("fromInterface", FromAnInterface.class)
        .run(
            context -> {
              assertThat(context).hasNotFailed();
              Object bean = context.getBean("fromInterface");
              assertThat(org.springframework.aop.support.AopUtils.isAopProxy(bean)).isTrue();
              // The advice is on the class's method too, the one a class proxy intercepts.
              assertThat(
                      ((org.springframework.aop.framework.Advised) bean)
                          .getAdvisors()[0].getAdvice())
                  .isInstanceOf(dev.nolock.spring.internal.IdempotentRequests.class);
              // A class proxy calls the matcher with the class's method, which carries no
              // annotation of its own: it must still match.
              assertThat(
                      ((org.springframework.aop.PointcutAdvisor)
                              ((org.springframework.aop.framework.Advised) bean).getAdvisors()[0])
                          .getPointcut()
                          .getMethodMatcher()
                          .matches(
                              FromAnInterface.class.getMethod("create"), FromAnInterface.class))
                  .isTrue();
            });
  }

  @Test
  void onAGetStartUpFailsNamingTheBeanAndMethod() {
    assertFails(OnAGet.class, "bean 'bad'", "OnAGet.read", "mapped to [GET]");
  }

  @Test
  void onAMappingForEveryMethodStartUpFails() {
    assertFails(EveryMethod.class, "EveryMethod.any", "mapped to every HTTP method");
  }

  @Test
  void aMethodThatReadsTheBodyStreamItselfIsRefused() {
    assertFails(ReadsTheStream.class, "ReadsTheStream.upload", "java.io.InputStream");
  }

  @Test
  void aPrivateMethodTheProxyCannotInterceptIsRefused() {
    assertFails(PrivateMethod.class, "PrivateMethod.create", "private, final or static");
  }

  @Test
  void withTransactionalStartUpFailsSayingWhy() {
    assertFails(Transactional1.class, "Transactional1.create", "it is @Transactional");
  }

  @Test
  void withoutResponseEntityStartUpFails() {
    assertFails(PlainBody.class, "PlainBody.create", "return ResponseEntity");
  }

  @Test
  void twoMethodsWithOneScopeFailStartUpNamingBoth() {
    web.withBean("fine", Fine.class)
        .withBean("bad", SameScope.class)
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("scope \"Fine.create\" is also the scope of")
                    .hasStackTraceContaining("bean 'fine'")
                    .hasStackTraceContaining("bean 'bad'"));
  }

  @Test
  void aValueTheBuilderRefusesFailsStartUpNamingTheProperty() {
    web.withPropertyValues("nolock.idempotency.lease=0s")
        .run(
            context ->
                assertThat(context.getStartupFailure())
                    .hasStackTraceContaining("nolock.idempotency.lease: "));
  }

  @Test
  void theApplicationsOwnKeysWin() {
    web.withBean(
            "mine",
            IdempotencyKeys.class,
            () ->
                IdempotencyKeys.create(
                    new DriverManagerDataSource("jdbc:postgresql://127.0.0.1:1/x"),
                    dev.nolock.idempotency.IdempotencyConfig.ofDefaults(),
                    dev.nolock.idempotency.ResultCodec.utf8()))
        .run(
            context -> {
              assertThat(context).hasSingleBean(IdempotencyKeys.class);
              assertThat(context).hasBean("mine");
            });
  }

  private void assertFails(Class<?> controller, String... expected) {
    web.withBean("bad", controller)
        .run(
            context -> {
              assertThat(context).hasFailed();
              for (String text : expected) {
                assertThat(context.getStartupFailure()).hasStackTraceContaining(text);
              }
            });
  }
}
