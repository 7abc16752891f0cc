package dev.nolock.architecture;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.classes;
import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

import com.tngtech.archunit.base.DescribedPredicate;
import com.tngtech.archunit.core.domain.Dependency;
import com.tngtech.archunit.core.domain.JavaClass;
import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.domain.JavaCodeUnit;
import com.tngtech.archunit.core.domain.JavaField;
import com.tngtech.archunit.core.domain.JavaMember;
import com.tngtech.archunit.core.domain.JavaMethod;
import com.tngtech.archunit.core.domain.JavaModifier;
import com.tngtech.archunit.core.domain.JavaType;
import com.tngtech.archunit.core.importer.ImportOption;
import com.tngtech.archunit.junit.AnalyzeClasses;
import com.tngtech.archunit.junit.ArchTest;
import com.tngtech.archunit.lang.ArchCondition;
import com.tngtech.archunit.lang.ArchRule;
import com.tngtech.archunit.lang.ConditionEvents;
import com.tngtech.archunit.lang.SimpleConditionEvent;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * The shape of nolock, checked on the production classes of every module (tests excluded: a test
 * may reach into its own module's internals, and the contract suites live in test jars).
 *
 * <p>A module is identified by its package root; a class belongs to the module with the longest
 * root its package starts with, so {@code dev.nolock.lock.redis.internal.Scripts} belongs to the
 * Redis lock backend, not to the fenced lock's core. A module's {@code internal} package is its
 * own: another module that needs something from it needs it as public API of the owning module.
 */
@AnalyzeClasses(
    packages = "dev.nolock",
    importOptions = {
      ImportOption.DoNotIncludeTests.class,
      ArchitectureTest.DoNotIncludeTestJars.class
    })
class ArchitectureTest {

  /**
   * Leaves out a module's test-jar ({@code *-tests.jar}, on this module's classpath for the tests
   * that share its helpers): test classes, not production ones. {@link
   * ImportOption.DoNotIncludeTests} recognises only test-class folders.
   */
  static final class DoNotIncludeTestJars implements ImportOption {
    @Override
    public boolean includes(com.tngtech.archunit.core.importer.Location location) {
      return !location.contains("-tests.jar");
    }
  }

  static final String PATTERNS = "dev.nolock.patterns";
  static final String PATTERNS_SQL = "dev.nolock.patterns.sql";
  static final String LOCK = "dev.nolock.lock";
  static final String LOCK_POSTGRES = "dev.nolock.lock.postgres";
  static final String LOCK_REDIS = "dev.nolock.lock.redis";
  static final String LOCK_ETCD = "dev.nolock.lock.etcd";
  static final String LOCK_DYNAMODB = "dev.nolock.lock.dynamodb";
  static final String LOCK_KUBERNETES = "dev.nolock.lock.kubernetes";
  static final String CAS = "dev.nolock.cas";
  static final String DYNAMODB = "dev.nolock.dynamodb";
  static final String QUEUE = "dev.nolock.queue";
  static final String IDEMPOTENCY = "dev.nolock.idempotency";
  static final String IDEMPOTENCY_HTTP = "dev.nolock.idempotency.http";
  static final String SCHEDULE = "dev.nolock.schedule";
  static final String OWNERSHIP = "dev.nolock.ownership";
  static final String SHEDLOCK = "dev.nolock.shedlock";
  static final String TESTKIT = "dev.nolock.testkit";
  static final String BENCHMARKS = "dev.nolock.benchmarks";

  /** Every module's package root; a new module adds its root here. */
  static final List<String> MODULES =
      List.of(
          PATTERNS,
          PATTERNS_SQL,
          LOCK,
          LOCK_POSTGRES,
          LOCK_REDIS,
          LOCK_ETCD,
          LOCK_DYNAMODB,
          LOCK_KUBERNETES,
          CAS,
          DYNAMODB,
          QUEUE,
          IDEMPOTENCY,
          IDEMPOTENCY_HTTP,
          SCHEDULE,
          OWNERSHIP,
          SHEDLOCK,
          TESTKIT,
          BENCHMARKS);

  /** The modules that talk to no SQL database: they must not bring jOOQ or the SQL layer along. */
  static final Set<String> NON_SQL =
      Set.of(LOCK_REDIS, LOCK_ETCD, LOCK_DYNAMODB, LOCK_KUBERNETES, DYNAMODB);

  /** The module of a package: the longest root it starts with, if any. */
  static Optional<String> moduleOf(String packageName) {
    return MODULES.stream()
        .filter(root -> packageName.equals(root) || packageName.startsWith(root + "."))
        .max(Comparator.comparingInt(String::length));
  }

  static Optional<String> moduleOf(JavaClass c) {
    return moduleOf(c.getPackageName());
  }

  /** Whether {@code c} is in the {@code internal} package (or below) of its module. */
  static boolean isInternal(JavaClass c) {
    return moduleOf(c)
        .map(
            root ->
                c.getPackageName().equals(root + ".internal")
                    || c.getPackageName().startsWith(root + ".internal."))
        .orElse(false);
  }

  static DescribedPredicate<JavaClass> inModule(String... roots) {
    Set<String> wanted = Set.of(roots);
    return DescribedPredicate.describe(
        "in module " + String.join(" or ", roots),
        c -> moduleOf(c).map(wanted::contains).orElse(false));
  }

  static DescribedPredicate<JavaClass> inNolockOutsideModule(String root) {
    return DescribedPredicate.describe(
        "in another nolock module than " + root,
        c -> moduleOf(c).map(m -> !m.equals(root)).orElse(false));
  }

  /** No class depends on a class in another module's internal package. */
  static final ArchCondition<JavaClass> NOT_USE_ANOTHER_MODULES_INTERNALS =
      new ArchCondition<>("not depend on another module's internal package") {
        @Override
        public void check(JavaClass origin, ConditionEvents events) {
          String from = moduleOf(origin).orElse("?");
          for (Dependency dependency : origin.getDirectDependenciesFromSelf()) {
            JavaClass target = dependency.getTargetClass();
            Optional<String> to = moduleOf(target);
            if (to.isPresent() && !to.get().equals(from) && isInternal(target)) {
              events.add(
                  SimpleConditionEvent.violated(
                      dependency,
                      "module "
                          + from
                          + " uses the internal package of module "
                          + to.get()
                          + " (make what it needs public API of "
                          + to.get()
                          + "): "
                          + dependency.getDescription()));
            }
          }
        }
      };

  @ArchTest
  static final ArchRule every_class_belongs_to_a_known_module =
      classes()
          .that()
          .resideInAPackage("dev.nolock..")
          .should(
              new ArchCondition<>("belong to a module listed in ArchitectureTest.MODULES") {
                @Override
                public void check(JavaClass c, ConditionEvents events) {
                  if (moduleOf(c).isEmpty()) {
                    events.add(
                        SimpleConditionEvent.violated(
                            c,
                            c.getName()
                                + " is in no known module: add its package root to"
                                + " ArchitectureTest.MODULES and give it its layering rules"));
                  }
                }
              });

  @ArchTest
  static final ArchRule no_module_uses_another_modules_internals =
      classes().that().resideInAPackage("dev.nolock..").should(NOT_USE_ANOTHER_MODULES_INTERNALS);

  @ArchTest
  static final ArchRule patterns_core_depends_on_nothing_else_of_nolock_nor_on_jooq =
      noClasses()
          .that(inModule(PATTERNS))
          .should()
          .dependOnClassesThat(
              inNolockOutsideModule(PATTERNS)
                  .or(
                      DescribedPredicate.describe(
                          "in org.jooq", c -> c.getPackageName().startsWith("org.jooq"))));

  @ArchTest
  static final ArchRule non_sql_backends_do_not_depend_on_the_sql_layer_nor_on_jooq =
      noClasses()
          .that(inModule(NON_SQL.toArray(String[]::new)))
          .should()
          .dependOnClassesThat(
              inModule(PATTERNS_SQL)
                  .or(
                      DescribedPredicate.describe(
                          "in org.jooq", c -> c.getPackageName().startsWith("org.jooq"))));

  @ArchTest
  static final ArchRule no_production_class_depends_on_the_testkit_or_the_benchmarks =
      noClasses()
          .that(DescribedPredicate.not(inModule(TESTKIT, BENCHMARKS)))
          .and()
          .resideInAPackage("dev.nolock..")
          .should()
          .dependOnClassesThat(inModule(TESTKIT, BENCHMARKS));

  @ArchTest
  static final ArchRule the_idempotency_core_carries_no_http_code =
      noClasses()
          .that(inModule(IDEMPOTENCY))
          .should()
          .dependOnClassesThat(
              inModule(IDEMPOTENCY_HTTP)
                  .or(
                      DescribedPredicate.describe(
                          "in com.sun.net.httpserver",
                          c -> c.getPackageName().startsWith("com.sun.net.httpserver"))));

  /**
   * Whether {@code c} is part of a module's public API: outside its {@code internal} package and
   * outside the benchmarks, and reachable from other packages (public or protected, as is every
   * class it is nested in).
   */
  static boolean isPublicApi(JavaClass c) {
    if (moduleOf(c).filter(BENCHMARKS::equals).isPresent() || isInternal(c)) {
      return false;
    }
    for (Optional<JavaClass> k = Optional.of(c); k.isPresent(); k = k.get().getEnclosingClass()) {
      Set<JavaModifier> modifiers = k.get().getModifiers();
      if (!modifiers.contains(JavaModifier.PUBLIC) && !modifiers.contains(JavaModifier.PROTECTED)) {
        return false;
      }
    }
    return true;
  }

  static final String JAVA_OPTIONAL = "java.util.Optional";

  /**
   * Whether {@code type} is, or involves (as a type argument, bound or array component), Optional.
   */
  static boolean mentionsJavaOptional(JavaType type) {
    return type.getAllInvolvedRawTypes().stream().anyMatch(t -> t.getName().equals(JAVA_OPTIONAL));
  }

  /** The types a member shows its callers: its field type, or its return, parameter and bounds. */
  static List<JavaType> signatureTypes(JavaMember member) {
    List<JavaType> types = new ArrayList<>();
    if (member instanceof JavaField field) {
      types.add(field.getType());
    } else if (member instanceof JavaCodeUnit codeUnit) {
      types.add(codeUnit.getReturnType());
      types.addAll(codeUnit.getParameterTypes());
      codeUnit.getTypeParameters().forEach(p -> types.addAll(p.getBounds()));
    }
    return types;
  }

  /**
   * No public signature takes or answers {@code java.util.Optional}: absence is a vavr {@code
   * Option} across nolock's API (a caller gets one vocabulary, and the contracts' implementers do
   * not convert back and forth). Internal code and the benchmarks may use either.
   */
  @ArchTest
  static final ArchRule no_public_signature_uses_java_util_optional =
      classes()
          .that()
          .resideInAPackage("dev.nolock..")
          .and(DescribedPredicate.describe("are public API", ArchitectureTest::isPublicApi))
          .should(
              new ArchCondition<>(
                  "not mention java.util.Optional in a public or protected member") {
                @Override
                public void check(JavaClass c, ConditionEvents events) {
                  for (JavaMember member : c.getMembers()) {
                    Set<JavaModifier> modifiers = member.getModifiers();
                    if ((!modifiers.contains(JavaModifier.PUBLIC)
                            && !modifiers.contains(JavaModifier.PROTECTED))
                        || modifiers.contains(JavaModifier.SYNTHETIC)
                        || modifiers.contains(JavaModifier.BRIDGE)
                        || implementsForeignMethod(member)) {
                      continue;
                    }
                    for (JavaType type : signatureTypes(member)) {
                      if (mentionsJavaOptional(type)) {
                        events.add(
                            SimpleConditionEvent.violated(
                                member,
                                member.getFullName()
                                    + " mentions java.util.Optional in "
                                    + type.getName()
                                    + ": public signatures use io.vavr.control.Option"));
                        break;
                      }
                    }
                  }
                }
              });

  /**
   * Whether {@code member} implements a method of a supertype outside nolock (ShedLock's {@code
   * LockProvider.lock}): that library chose its signature, Optional included.
   */
  static boolean implementsForeignMethod(JavaMember member) {
    if (!(member instanceof JavaMethod method)) {
      return false;
    }
    // The import holds nolock's classes only, so a foreign supertype's methods are read by
    // reflection (the test classpath has the foreign library). A method whose types the classpath
    // lacks (testkit's jqwik arbitraries) implements nothing foreign that matters here.
    java.lang.reflect.Method reflected;
    try {
      reflected = method.reflect();
    } catch (RuntimeException | LinkageError e) {
      return false;
    }
    List<Class<?>> supertypes = new ArrayList<>();
    for (Class<?> c = reflected.getDeclaringClass(); c != null; c = c.getSuperclass()) {
      supertypes.add(c.getSuperclass());
      collectInterfaces(c, supertypes);
    }
    return supertypes.stream()
        .filter(t -> t != null && !t.getPackageName().startsWith("dev.nolock"))
        .anyMatch(
            t -> {
              try {
                t.getMethod(reflected.getName(), reflected.getParameterTypes());
                return true;
              } catch (NoSuchMethodException e) {
                return false;
              }
            });
  }

  private static void collectInterfaces(Class<?> type, List<Class<?>> into) {
    for (Class<?> i : type.getInterfaces()) {
      into.add(i);
      collectInterfaces(i, into);
    }
  }

  /** The import found the modules: a rule over an empty import would pass vacuously. */
  @ArchTest
  static void every_module_was_imported(JavaClasses imported) {
    for (String root : MODULES) {
      if (imported.stream().noneMatch(c -> moduleOf(c).filter(root::equals).isPresent())) {
        throw new AssertionError(
            "No production class of module "
                + root
                + " was imported: add its artifact to architecture/pom.xml");
      }
    }
  }
}
