/* mqtool judge (RocketMQ 5.3.3 build): replaces the RocksDB store's metrics manager (no-op). */
package org.apache.rocketmq.store.metrics;

import io.opentelemetry.api.common.AttributesBuilder;
import io.opentelemetry.api.metrics.Meter;
import io.opentelemetry.sdk.metrics.InstrumentSelector;
import io.opentelemetry.sdk.metrics.ViewBuilder;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import org.apache.rocketmq.common.Pair;
import org.apache.rocketmq.store.MessageStore;

public class RocksDBStoreMetricsManager {
    public static Supplier<AttributesBuilder> attributesBuilderSupplier;

    public static List<Pair<InstrumentSelector, ViewBuilder>> getMetricsView() {
        return new ArrayList<>();
    }

    public static void init(Meter meter, Supplier<AttributesBuilder> supplier, MessageStore messageStore) {
    }

    public static AttributesBuilder newAttributesBuilder() {
        return DefaultStoreMetricsManager.newAttributesBuilder();
    }
}
