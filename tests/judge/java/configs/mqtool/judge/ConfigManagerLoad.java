package mqtool.judge;

import org.apache.rocketmq.broker.BrokerController;
import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyServerConfig;
import org.apache.rocketmq.store.config.MessageStoreConfig;

/**
 * The broker's own load of a store's consumerOffset.json (ConsumerOffsetManager#load, with its
 * .bak fallback), as BrokerController#initialize runs it: prints "loaded" and the number of
 * offsetTable entries, or "fails" when the load returns false (the broker then does not start).
 * Nothing is started; the controller is only built to give the manager its store root.
 */
public class ConfigManagerLoad {
    public static void main(String[] args) throws Exception {
        MessageStoreConfig store = new MessageStoreConfig();
        store.setStorePathRootDir(args[0]);
        NettyServerConfig server = new NettyServerConfig();
        server.setListenPort(0);
        BrokerController controller = new BrokerController(new BrokerConfig(), server,
            new NettyClientConfig(), store);
        boolean ok = controller.getConsumerOffsetManager().load();
        System.out.println(ok ? "loaded " + controller.getConsumerOffsetManager().getOffsetTable().size()
            : "fails");
        System.exit(0);
    }
}
