package dev.nolock.testkit;

import static java.nio.charset.StandardCharsets.UTF_8;
import static org.assertj.core.api.Assertions.assertThat;

import dev.nolock.testkit.internal.UniqueNames;
import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.kv.TxnResponse;
import io.etcd.jetcd.op.Cmp;
import io.etcd.jetcd.op.CmpTarget;
import io.etcd.jetcd.op.Op;
import io.etcd.jetcd.options.PutOption;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

@ExtendWith(EtcdExtension.class)
class EtcdExtensionIT {

  // etcd is shared by every test class: a random key keeps this one's writes apart.
  private static final ByteSequence KEY = bytes("nolock/t/" + UniqueNames.hex12() + "/owner");

  @AfterAll
  static void deleteKey(Client etcd) throws Exception {
    etcd.getKVClient().delete(KEY).get(10, TimeUnit.SECONDS);
  }

  @Test
  void putIfCreateRevisionIsZeroSucceedsOnceAndRefusesTheSecondWriter(Client etcd)
      throws Exception {
    TxnResponse first = putIfAbsent(etcd, "first");
    TxnResponse second = putIfAbsent(etcd, "second");

    assertThat(first.isSucceeded()).isTrue();
    assertThat(second.isSucceeded()).as("second writer was attempted and refused").isFalse();
    var stored = etcd.getKVClient().get(KEY).get(10, TimeUnit.SECONDS).getKvs();
    assertThat(stored)
        .singleElement()
        .satisfies(
            kv -> {
              assertThat(kv.getValue().toString(UTF_8)).isEqualTo("first");
              assertThat(kv.getCreateRevision()).isEqualTo(first.getHeader().getRevision());
            });
  }

  private static TxnResponse putIfAbsent(Client etcd, String owner) throws Exception {
    return etcd.getKVClient()
        .txn()
        .If(new Cmp(KEY, Cmp.Op.EQUAL, CmpTarget.createRevision(0)))
        .Then(Op.put(KEY, bytes(owner), PutOption.DEFAULT))
        .commit()
        .get(10, TimeUnit.SECONDS);
  }

  private static ByteSequence bytes(String text) {
    return ByteSequence.from(text, UTF_8);
  }
}
