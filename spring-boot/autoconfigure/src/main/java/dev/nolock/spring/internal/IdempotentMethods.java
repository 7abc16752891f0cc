package dev.nolock.spring.internal;

import dev.nolock.idempotency.IdempotencyKeys;
import dev.nolock.idempotency.http.IdempotentHttpHandler.Reply;
import dev.nolock.spring.Idempotent;
import jakarta.servlet.ServletRequest;
import java.io.InputStream;
import java.io.Reader;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.util.EnumSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.springframework.aop.framework.autoproxy.AbstractBeanFactoryAwareAdvisingPostProcessor;
import org.springframework.aop.support.DefaultPointcutAdvisor;
import org.springframework.aop.support.annotation.AnnotationMatchingPointcut;
import org.springframework.beans.factory.BeanFactory;
import org.springframework.beans.factory.ObjectProvider;
import org.springframework.beans.factory.SmartInitializingSingleton;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.RequestMapping;
import org.springframework.web.bind.annotation.RequestMethod;

/**
 * Puts {@link IdempotentRequests} around every {@link Idempotent} method (a proxy, as for
 * {@code @Async} or {@code @Validated}), and checks each such method once every singleton exists,
 * failing start-up naming the bean and method when it is not a handler that changes state (mapped
 * to POST, PUT, PATCH or DELETE only), does not return {@code ResponseEntity}, is
 * {@code @Transactional} (its writes would go to a transaction of Spring's, apart from the key's,
 * and commit even when the key's attempt was superseded), has an invalid scope, or shares its scope
 * with another method.
 */
public final class IdempotentMethods extends AbstractBeanFactoryAwareAdvisingPostProcessor
    implements SmartInitializingSingleton {

  // Spring's ProxyConfig is Serializable; this post-processor is never serialized.
  private static final long serialVersionUID = 1L;

  private static final Set<RequestMethod> CHANGING =
      EnumSet.of(RequestMethod.POST, RequestMethod.PUT, RequestMethod.PATCH, RequestMethod.DELETE);

  private transient ConfigurableListableBeanFactory beanFactory;

  private final transient ObjectProvider<IdempotencyKeys<Reply>> keys;

  public IdempotentMethods(
      IdempotentRequests interceptor, ObjectProvider<IdempotencyKeys<Reply>> keys) {
    this.keys = keys;
    this.advisor =
        new DefaultPointcutAdvisor(
            // Inherited: an @Idempotent declared on an interface method (an OpenAPI-generated
            // API) counts, as the start-up check and the interceptor find it.
            new AnnotationMatchingPointcut(null, Idempotent.class, true), interceptor);
    // Outermost: the key is settled before any other advice (a retry, a cache) runs the method.
    setBeforeExistingAdvisors(true);
  }

  @Override
  public void setBeanFactory(BeanFactory beanFactory) {
    super.setBeanFactory(beanFactory);
    this.beanFactory = (ConfigurableListableBeanFactory) beanFactory;
  }

  @Override
  public void afterSingletonsInstantiated() {
    Map<String, String> scopes = new LinkedHashMap<>();
    boolean[] used = {false};
    AnnotatedMethods.forEach(
        beanFactory,
        Idempotent.class,
        (beanName, method, annotation) -> {
          String source = "bean '" + beanName + "', method " + method.toGenericString();
          used[0] = true;
          check(source, method);
          String scope = IdempotentRequests.scopeOf(method, annotation);
          try {
            IdempotencyKeys.requireValidScope(scope);
          } catch (IllegalArgumentException e) {
            throw refused(source, e.getMessage() + " Set @Idempotent(scope = ...).");
          }
          String earlier = scopes.putIfAbsent(scope, source);
          if (earlier != null) {
            throw refused(
                source,
                "its scope \""
                    + scope
                    + "\" is also the scope of "
                    + earlier
                    + ": one key would then run either; give each its own @Idempotent(scope ="
                    + " ...).");
          }
        });
  }

  private static void check(String source, Method method) {
    int modifiers = method.getModifiers();
    if (Modifier.isPrivate(modifiers)
        || Modifier.isFinal(modifiers)
        || Modifier.isStatic(modifiers)) {
      throw refused(
          source,
          "it is private, final or static, so the proxy that applies the key cannot intercept it:"
              + " make it a non-final instance method, package-private or public.");
    }
    for (Class<?> parameter : method.getParameterTypes()) {
      if (InputStream.class.isAssignableFrom(parameter)
          || Reader.class.isAssignableFrom(parameter)
          || ServletRequest.class.isAssignableFrom(parameter)) {
        throw refused(
            source,
            "it takes "
                + parameter.getName()
                + ", from which it could read the body that the key's fingerprint has read"
                + " already (it would find it empty): take the body as @RequestBody (byte[],"
                + " String or an object), and headers as @RequestHeader.");
      }
    }
    RequestMapping mapping =
        AnnotatedElementUtils.findMergedAnnotation(method, RequestMapping.class);
    if (mapping == null) {
      throw refused(source, "it is not a request handler (no @RequestMapping, @PostMapping, ...).");
    }
    if (mapping.method().length == 0 || !CHANGING.containsAll(List.of(mapping.method()))) {
      throw refused(
          source,
          "it is mapped to "
              + (mapping.method().length == 0 ? "every HTTP method" : List.of(mapping.method()))
              + "; idempotency keys are for requests that change state: map it to POST, PUT, PATCH"
              + " or DELETE only (a GET is safe to repeat as it is).");
    }
    if (!ResponseEntity.class.isAssignableFrom(method.getReturnType())) {
      throw refused(
          source,
          "it returns "
              + method.getReturnType().getName()
              + "; return ResponseEntity, whose status, headers and body are stored and replayed.");
    }
    if (AnnotatedMethods.isTransactional(method)) {
      throw refused(
          source,
          "it is @Transactional (on the method or its class): its writes would go to a"
              + " transaction of Spring's, apart from the idempotency key's, and commit even"
              + " when the key's attempt was superseded. Remove @Transactional: the method"
              + " already runs in the key's own transaction, which commits its writes together"
              + " with the stored answer.");
    }
  }

  private static IllegalStateException refused(String source, String why) {
    return new IllegalStateException("@Idempotent on " + source + ": " + why);
  }
}
