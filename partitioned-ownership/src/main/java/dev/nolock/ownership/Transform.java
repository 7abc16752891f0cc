package dev.nolock.ownership;

import java.util.List;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;

/**
 * Turns one input record into the output records of an {@link ExactlyOncePipeline}. The outputs are
 * sent in the transaction that also commits the input's offset, so they become visible to {@code
 * read_committed} consumers exactly once, or not at all.
 *
 * <p>Must be a function of the record (and of state that is itself made exactly once): after an
 * abort the batch is transformed again. Throwing aborts the transaction and stops the pipeline.
 *
 * @param <KI> input key type
 * @param <VI> input value type
 * @param <KO> output key type
 * @param <VO> output value type
 */
@FunctionalInterface
public interface Transform<KI, VI, KO, VO> {

  List<ProducerRecord<KO, VO>> apply(ConsumerRecord<KI, VI> record) throws Exception;
}
