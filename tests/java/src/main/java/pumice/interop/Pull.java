package pumice.interop;

import java.util.Set;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * pull --topic T [--group G] [--sub EXPR] [--max N]
 *
 * <p>A DefaultMQPullConsumer: for each queue, from the group's stored offset (0 if none), pull
 * until NO_NEW_MSG (each pull: a "pull" line with status and offsets, then its "received"
 * lines), store the next offset with updateConsumeOffset and persist it to the broker.
 */
final class Pull {
    static void run(Driver.Args a) throws Exception {
        String topic = a.get("topic", "TopicTest");
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(a.get("namespace", null),
            a.get("group", "PumiceInteropPull"), Driver.rpcHook(a));
        Driver.configure(c, a);
        c.start();
        Set<MessageQueue> queues = c.fetchSubscribeMessageQueues(topic);
        Driver.emit("started", "clientId", c.buildMQClientId(), "queues", queues.size());
        for (MessageQueue mq : queues) {
            long offset = Math.max(c.fetchConsumeOffset(mq, true), 0);
            Driver.emit("offset", "queueId", mq.getQueueId(), "offset", offset, "min", c.minOffset(mq),
                "max", c.maxOffset(mq), "earliestMsgStoreTime", c.earliestMsgStoreTime(mq));
            for (int n = 0; n < 1000; n++) {
                PullResult r = c.pull(mq, a.get("sub", "*"), offset, a.integer("max", 32));
                Driver.emit("pull", "queueId", mq.getQueueId(), "status", r.getPullStatus().name(),
                    "offset", offset, "next", r.getNextBeginOffset(), "min", r.getMinOffset(), "max", r.getMaxOffset());
                if (r.getMsgFoundList() != null) {
                    for (MessageExt m : r.getMsgFoundList()) {
                        Driver.emit("received", Driver.describe(m));
                    }
                }
                if (r.getNextBeginOffset() == offset) {
                    break;
                }
                offset = r.getNextBeginOffset();
                c.updateConsumeOffset(mq, offset);
            }
            c.getDefaultMQPullConsumerImpl().getOffsetStore().persist(mq); // UPDATE_CONSUMER_OFFSET, oneway
        }
        Thread.sleep(300); // the oneway offset updates leave before shutdown
        c.shutdown();
        Driver.emit("stopped");
    }
}
