package dev.nolock.lock.redis;

import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.lock.redis.internal.LuaScript;
import dev.nolock.lock.redis.internal.Scripts;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.util.Arrays;
import java.util.Set;
import java.util.stream.Collectors;
import org.junit.jupiter.api.Test;

class RedisScriptsTest {

  @Test
  void publishesEveryScriptTheBackendAndTheFenceRunByteForByte() throws IllegalAccessException {
    Set<String> published =
        Arrays.stream(RedisScripts.values())
            .map(s -> s.name() + "=" + s.sha() + "=" + s.source())
            .collect(Collectors.toSet());
    Set<String> run = new java.util.HashSet<>();
    for (Field field : Scripts.class.getFields()) {
      if (Modifier.isStatic(field.getModifiers()) && field.getType() == LuaScript.class) {
        LuaScript script = (LuaScript) field.get(null);
        run.add(field.getName() + "=" + script.sha() + "=" + script.source());
      }
    }
    assertThat(published).isEqualTo(run);
  }
}
