/* mqtool judge (RocketMQ 5.3.3 build): a plain bounded queue under the Conversant name. */
package com.conversantmedia.util.concurrent;

import java.util.concurrent.ArrayBlockingQueue;

public class DisruptorBlockingQueue<E> extends ArrayBlockingQueue<E> {
    public DisruptorBlockingQueue(int capacity) {
        super(capacity);
    }
}
