package pumice.interop;

import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;

/**
 * push --topic T [--sub EXPR | --sql SQL92] [--group G] [--model CLUSTERING|BROADCASTING] [--orderly true]
 * [--from FIRST|LAST|TIMESTAMP] [--timestamp yyyyMMddHHmmss] [--count N] [--duration S]
 * [--fail N] [--retry-level L] [--max-reconsume N] [--namespace NS] [--instance I] [--trace true]
 *
 * <p>A DefaultMQPushConsumer; one "received" line per delivery. --fail N answers
 * RECONSUME_LATER (orderly: SUSPEND_CURRENT_QUEUE_A_MOMENT) while a message's reconsumeTimes is
 * under N (-1: always), with --retry-level as the delay level of the next try (0: the broker
 * chooses). Stops after --count deliveries (then --linger-ms), on "stop", or after --duration.
 * With --drain true the linger starts only once every process queue is empty: each delivery has
 * been acknowledged or sent back to the broker, so the offsets the consumer persists cover them.
 */
final class Push {
    static void run(Driver.Args a) throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(a.get("namespace", null),
            a.get("group", "PumiceInteropPush"), Driver.rpcHook(a), new AllocateMessageQueueAveragely(), a.bool("trace"),
            null);
        Driver.configure(c, a);
        for (String topic : a.all("topic")) {
            if (a.has("sql")) {
                c.subscribe(topic, MessageSelector.bySql(a.get("sql", null)));
            } else {
                c.subscribe(topic, a.get("sub", "*"));
            }
        }
        c.setMessageModel(MessageModel.valueOf(a.get("model", "CLUSTERING")));
        String from = a.get("from", "FIRST");
        c.setConsumeFromWhere(ConsumeFromWhere.valueOf(
            from.equals("TIMESTAMP") ? "CONSUME_FROM_TIMESTAMP" : "CONSUME_FROM_" + from + "_OFFSET"));
        if (a.has("timestamp")) {
            c.setConsumeTimestamp(a.get("timestamp", null));
        }
        if (a.has("max-reconsume")) {
            c.setMaxReconsumeTimes(a.integer("max-reconsume", 16));
        }
        c.setConsumeMessageBatchMaxSize(a.integer("batch", 1));
        c.setPullBatchSize(a.integer("pull-batch", 32));
        c.setConsumeThreadMin(a.integer("threads", 4));
        c.setConsumeThreadMax(a.integer("threads", 4));
        c.setPersistConsumerOffsetInterval(a.integer("persist-ms", 1000));
        c.setSuspendCurrentQueueTimeMillis(a.integer("suspend-ms", 200));

        int count = a.integer("count", Integer.MAX_VALUE);
        int fail = a.integer("fail", 0);
        int retryLevel = a.integer("retry-level", 0);
        long consumeMs = a.integer("consume-ms", 0);
        AtomicInteger received = new AtomicInteger();
        Driver.Stopper stopper = new Driver.Stopper(a.number("duration", 60));
        Runnable counted = () -> {
            if (received.incrementAndGet() == count) {
                new Thread(() -> {
                    if (a.bool("drain")) {
                        drain(c, stopper);
                    }
                    sleep(a.integer("linger-ms", 500));
                    stopper.stop();
                }).start();
            }
        };
        if (a.bool("orderly")) {
            c.registerMessageListener((MessageListenerOrderly) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    Driver.emit("received", Driver.describe(m));
                    sleep(consumeMs);
                    if (fails(m, fail)) {
                        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                    }
                    counted.run();
                }
                return ConsumeOrderlyStatus.SUCCESS;
            });
        } else {
            c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                for (MessageExt m : msgs) {
                    Driver.emit("received", Driver.describe(m));
                    sleep(consumeMs);
                    counted.run();
                    if (fails(m, fail)) {
                        ctx.setDelayLevelWhenNextConsume(retryLevel);
                        return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                    }
                }
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
        }
        c.start();
        Driver.emit("started", "clientId", c.buildMQClientId());
        stopper.await();
        c.shutdown();
        Driver.emit("stopped", "received", received.get());
    }

    /** Waits (until the stopper's deadline) for every process queue to hold no message. */
    static void drain(DefaultMQPushConsumer c, Driver.Stopper stopper) {
        while (!stopper.stopped()) {
            long held = 0;
            for (ProcessQueue q : c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().values()) {
                held += q.getMsgCount().get();
            }
            if (held == 0) {
                return;
            }
            sleep(20);
        }
    }

    static boolean fails(MessageExt m, int fail) {
        return fail < 0 || m.getReconsumeTimes() < fail;
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }
}
