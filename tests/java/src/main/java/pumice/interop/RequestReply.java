package pumice.interop;

import java.nio.charset.StandardCharsets;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * request --topic T --count N [--timeout-ms MS] [--label L]: DefaultMQProducer.request for each
 * message (body "L-i"); prints "reply" (body, properties) or "error" per request, then "done".
 *
 * <p>responder --topic T [--group G] [--duration S]: a DefaultMQPushConsumer answering each request
 * with MessageUtil.createReplyMessage(request, "re:" + body), sent by a DefaultMQProducer; prints
 * "replied" per request; stops on "stop", end of input, or --duration.
 */
final class RequestReply {
    static void request(Driver.Args a) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(a.get("group", "PumiceInteropRequester"));
        Driver.configure(p, a);
        p.start();
        Driver.emit("started", "clientId", p.buildMQClientId());
        int count = a.integer("count", 1);
        long timeout = a.integer("timeout-ms", 10_000);
        for (int i = 0; i < count; i++) {
            Message m = new Message(a.get("topic", "TopicTest"), Driver.body(a.get("label", "q"), i, 0));
            try {
                Message reply = p.request(m, timeout);
                Driver.emit("reply", "i", i, "topic", reply.getTopic(), "bodyText",
                    new String(reply.getBody(), StandardCharsets.UTF_8), "props", reply.getProperties());
            } catch (Exception e) {
                Driver.emit("error", "i", i, "error", e.toString());
            }
        }
        p.shutdown();
        Driver.emit("done", "count", count);
    }

    static void respond(Driver.Args a) throws Exception {
        DefaultMQProducer replier = new DefaultMQProducer(a.get("group", "PumiceInteropResponder") + "-reply");
        Driver.configure(replier, a);
        replier.start();
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(a.get("group", "PumiceInteropResponder"));
        Driver.configure(c, a);
        c.subscribe(a.get("topic", "TopicTest"), "*");
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            for (MessageExt m : msgs) {
                try {
                    byte[] body = ("re:" + new String(m.getBody(), StandardCharsets.UTF_8)).getBytes(StandardCharsets.UTF_8);
                    replier.send(MessageUtil.createReplyMessage(m, body));
                    Driver.emit("replied", "bodyText", new String(m.getBody(), StandardCharsets.UTF_8),
                        "props", m.getProperties());
                } catch (Exception e) {
                    Driver.emit("error", "error", e.toString());
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        Driver.emit("started", "clientId", c.buildMQClientId());
        new Driver.Stopper(a.number("duration", 60)).await();
        c.shutdown();
        replier.shutdown();
        Driver.emit("stopped");
    }
}
