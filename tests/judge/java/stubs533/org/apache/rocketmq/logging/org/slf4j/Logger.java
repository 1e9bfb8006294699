/* mqtool judge (RocketMQ 5.3.3 build): RocketMQ 5 logs through a relocated slf4j
 * (org.apache.rocketmq.logging.org.slf4j, from rocketmq-logging, not on this machine). This
 * stand-in is plain slf4j's Logger under that name. */
package org.apache.rocketmq.logging.org.slf4j;

public interface Logger extends org.slf4j.Logger {
}
