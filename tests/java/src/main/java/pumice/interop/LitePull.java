package pumice.interop;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashSet;
import java.util.List;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * litepull --topic T --mode assign|subscribe [--group G] [--sub EXPR] [--count N] [--duration S]
 * [--seek QUEUE:OFFSET ...] [--seek-after N] [--seek-begin true] [--seek-time MILLIS] [--from FIRST|LAST]
 *
 * <p>A DefaultLitePullConsumer with auto-commit off: poll, one "received" line per message,
 * commitSync after each poll. In assign mode it takes every queue of the topic and applies the
 * seeks (--seek-time: offsetForTimestamp). At the end it persists the offsets, prints one
 * "committed" line per queue and "stopped".
 */
final class LitePull {
    static void run(Driver.Args a) throws Exception {
        String topic = a.get("topic", "TopicTest");
        DefaultLitePullConsumer c = new DefaultLitePullConsumer(a.get("namespace", null),
            a.get("group", "PumiceInteropLitePull"), null);
        Driver.configure(c, a);
        c.setAutoCommit(false);
        c.setPullBatchSize(a.integer("pull-batch", 16));
        c.setPollTimeoutMillis(1000);
        c.setConsumeFromWhere(ConsumeFromWhere.valueOf("CONSUME_FROM_" + a.get("from", "FIRST") + "_OFFSET"));
        boolean assign = a.get("mode", "assign").equals("assign");
        if (!assign) {
            c.subscribe(topic, a.get("sub", "*"));
        }
        c.start();
        Driver.emit("started", "clientId", c.buildMQClientId());
        Collection<MessageQueue> queues = new ArrayList<>();
        if (assign) {
            queues = c.fetchMessageQueues(topic);
            c.assign(queues);
            for (MessageQueue mq : queues) {
                if (a.bool("seek-begin")) {
                    c.seekToBegin(mq);
                }
                if (a.has("seek-time")) {
                    long offset = c.offsetForTimestamp(mq, Long.parseLong(a.get("seek-time", "0")));
                    Driver.emit("offsetForTimestamp", "queueId", mq.getQueueId(), "offset", offset);
                    c.seek(mq, offset);
                }
            }
            if (!a.has("seek-after")) {
                seek(c, a, queues);
            }
        }
        int count = a.integer("count", Integer.MAX_VALUE);
        int seekAfter = a.integer("seek-after", -1);
        long deadline = System.currentTimeMillis() + (long) (a.number("duration", 30) * 1000);
        int received = 0;
        while (received < count && System.currentTimeMillis() < deadline) {
            if (seekAfter >= 0 && received >= seekAfter) {
                seek(c, a, queues);
                Driver.emit("seeked", "received", received);
                seekAfter = -1;
            }
            List<MessageExt> msgs = c.poll(500);
            for (MessageExt m : msgs) {
                Driver.emit("received", Driver.describe(m));
            }
            received += msgs.size();
            if (!msgs.isEmpty()) {
                c.commitSync();
            }
        }
        if (!assign) {
            queues = c.assignment();
        }
        c.commit(new HashSet<>(queues), true);
        for (MessageQueue mq : queues) {
            Driver.emit("committed", "queueId", mq.getQueueId(), "offset", c.committed(mq));
        }
        c.shutdown();
        Driver.emit("stopped", "received", received);
    }

    /** The --seek QUEUE:OFFSET moves. 4.9.8's seek races with a pull already under way for the
     * queue (its messages may still arrive), so a test that needs a clean seek seeks once the
     * queues are idle: --seek-after N, once N messages are in. */
    static void seek(DefaultLitePullConsumer c, Driver.Args a, Collection<MessageQueue> queues) throws Exception {
        for (String seek : a.all("seek")) {
            int queueId = Integer.parseInt(seek.split(":")[0]);
            for (MessageQueue mq : queues) {
                if (mq.getQueueId() == queueId) {
                    c.seek(mq, Long.parseLong(seek.split(":")[1]));
                }
            }
        }
    }
}
