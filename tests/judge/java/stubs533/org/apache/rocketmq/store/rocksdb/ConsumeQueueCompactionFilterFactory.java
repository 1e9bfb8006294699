/* mqtool judge (RocketMQ 5.3.3 build): RocketMQ's RocksDB consume-queue compaction filter needs
 * RocketMQ's own rocksdbjni build (RemoveConsumeQueueCompactionFilter), not on this machine. The
 * judge uses the file-based consume queue (storeType default); creating a filter fails loudly. */
package org.apache.rocketmq.store.rocksdb;

import org.apache.rocketmq.store.MessageStore;
import org.rocksdb.AbstractCompactionFilter;
import org.rocksdb.AbstractCompactionFilterFactory;
import org.rocksdb.Slice;

public class ConsumeQueueCompactionFilterFactory extends AbstractCompactionFilterFactory<AbstractCompactionFilter<Slice>> {
    public ConsumeQueueCompactionFilterFactory(final MessageStore messageStore) {
    }

    @Override
    public String name() {
        return "ConsumeQueueCompactionFilterFactory";
    }

    @Override
    public AbstractCompactionFilter<Slice> createCompactionFilter(final AbstractCompactionFilter.Context context) {
        throw new UnsupportedOperationException("judge build: no RocksDB consume queue");
    }
}
