package dev.nolock.spring.internal;

import java.lang.annotation.Annotation;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.List;
import java.util.Map;
import org.springframework.aop.scope.ScopedProxyUtils;
import org.springframework.aop.support.AopUtils;
import org.springframework.beans.factory.config.ConfigurableListableBeanFactory;
import org.springframework.context.annotation.Bean;
import org.springframework.core.MethodIntrospector;
import org.springframework.core.annotation.AnnotatedElementUtils;
import org.springframework.core.annotation.MergedAnnotations;
import org.springframework.core.annotation.MergedAnnotations.SearchStrategy;
import org.springframework.util.ClassUtils;
import org.springframework.util.ReflectionUtils;

/** The bean methods carrying one of the starter's annotations, and how they are called. */
final class AnnotatedMethods {

  /** One annotated method of a bean. */
  interface Found<A> {
    void accept(String beanName, Method method, A annotation);
  }

  /** A bean method, callable on the bean (through its proxy, if any). */
  record Call(Object bean, Method method) {

    /**
     * Calls the method; what it throws reaches the caller unchanged, the same instance, not wrapped
     * in an {@link InvocationTargetException}.
     */
    Object invoke(Object... args) throws Exception {
      try {
        return method.invoke(bean, args);
      } catch (InvocationTargetException e) {
        if (e.getCause() instanceof Exception thrown) {
          throw thrown;
        }
        if (e.getCause() instanceof Error error) {
          throw error;
        }
        throw e;
      }
    }
  }

  private static final List<String> TRANSACTIONAL =
      List.of(
          "org.springframework.transaction.annotation.Transactional",
          "jakarta.transaction.Transactional");

  private AnnotatedMethods() {}

  /**
   * Whether {@code method} or its class is {@code @Transactional} (Spring's or Jakarta's), declared
   * on it, an interface or a superclass.
   */
  static boolean isTransactional(Method method) {
    Class<?> userClass = ClassUtils.getUserClass(method.getDeclaringClass());
    return TRANSACTIONAL.stream()
        .anyMatch(
            t ->
                MergedAnnotations.from(method, SearchStrategy.TYPE_HIERARCHY).isPresent(t)
                    || MergedAnnotations.from(userClass, SearchStrategy.TYPE_HIERARCHY)
                        .isPresent(t));
  }

  /**
   * Each method of each bean's class (the user class behind a proxy) that carries {@code type},
   * leaving out {@code @Bean} factory methods.
   */
  static <A extends Annotation> void forEach(
      ConfigurableListableBeanFactory beanFactory, Class<A> type, Found<A> found) {
    for (String name : beanFactory.getBeanDefinitionNames()) {
      // A scoped bean is registered twice, as its proxy and its target: one handler, not two.
      Class<?> beanType = ScopedProxyUtils.isScopedTarget(name) ? null : beanFactory.getType(name);
      if (beanType == null) {
        continue;
      }
      Map<Method, A> methods =
          MethodIntrospector.selectMethods(
              ClassUtils.getUserClass(beanType),
              (MethodIntrospector.MetadataLookup<A>)
                  m ->
                      AnnotatedElementUtils.hasAnnotation(m, Bean.class)
                          ? null
                          : AnnotatedElementUtils.findMergedAnnotation(m, type));
      methods.forEach((method, annotation) -> found.accept(name, method, annotation));
    }
  }

  /** {@code method} of the bean named {@code beanName}, callable on the bean as it is wired. */
  static Call call(ConfigurableListableBeanFactory beanFactory, String beanName, Method method) {
    Object bean = beanFactory.getBean(beanName);
    Method invocable = AopUtils.selectInvocableMethod(method, bean.getClass());
    ReflectionUtils.makeAccessible(invocable);
    return new Call(bean, invocable);
  }
}
