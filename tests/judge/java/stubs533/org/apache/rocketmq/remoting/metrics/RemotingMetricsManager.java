/* mqtool judge (RocketMQ 5.3.3 build): replaces the remoting OpenTelemetry metrics (no-op). */
package org.apache.rocketmq.remoting.metrics;

import io.netty.util.concurrent.Future;
import io.opentelemetry.api.common.AttributesBuilder;
import io.opentelemetry.api.metrics.LongHistogram;
import io.opentelemetry.api.metrics.Meter;
import io.opentelemetry.sdk.metrics.InstrumentSelector;
import io.opentelemetry.sdk.metrics.ViewBuilder;
import java.util.ArrayList;
import java.util.List;
import java.util.function.Supplier;
import org.apache.rocketmq.common.Pair;
import org.apache.rocketmq.common.metrics.NopLongHistogram;
import org.apache.rocketmq.store.metrics.DefaultStoreMetricsManager;

public class RemotingMetricsManager {
    public static LongHistogram rpcLatency = new NopLongHistogram();
    public static Supplier<AttributesBuilder> attributesBuilderSupplier;

    public static AttributesBuilder newAttributesBuilder() {
        return DefaultStoreMetricsManager.newAttributesBuilder();
    }

    public static void initMetrics(Meter meter, Supplier<AttributesBuilder> supplier) {
    }

    public static List<Pair<InstrumentSelector, ViewBuilder>> getMetricsView() {
        return new ArrayList<>();
    }

    public static String getWriteAndFlushResult(Future<?> future) {
        return future.isCancelled() ? "cancel" : future.isSuccess() ? "success" : "write_channel_failed";
    }
}
