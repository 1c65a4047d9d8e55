package pumice.interop5;

import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Timer messages (RIP-43) from the RocketMQ 5.5.0 remoting client, run by
 * tests/integration/test_timer_messages.py as a process.
 *
 * <pre>java -cp pumice-interop5.jar:CLASSPATH pumice.interop5.Timer5 send --namesrv H:P --topic T --delaysMs 3000,1000 [--queue 0]</pre>
 *
 * send: one message per delay, in the order given, with {@code Message.setDeliverTimeMs(now + delay)}
 * (TIMER_DELIVER_MS), body "timer5-i", to queue --queue (0 by default) of the first broker; one JSON line
 * each: "sent" (i, msgId, due, status) or "refused" (i, due, code, remark).
 */
public final class Timer5 {
    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            args.put(argv[i].substring(2), argv[i + 1]);
        }
        try {
            if (!"send".equals(argv[0])) {
                System.err.println("unknown subcommand " + argv[0]);
                System.exit(2);
            }
            send(args);
        } catch (Throwable e) {
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0);
    }

    static void send(Map<String, String> args) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("Timer5Producer");
        producer.setNamesrvAddr(args.get("namesrv"));
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        try {
            String topic = args.get("topic");
            int queue = Integer.parseInt(args.getOrDefault("queue", "0"));
            String[] delays = args.get("delaysMs").split(",");
            for (int i = 0; i < delays.length; i++) {
                long due = System.currentTimeMillis() + Long.parseLong(delays[i].trim());
                Message msg = new Message(topic, "TagT", ("timer5-" + i).getBytes(StandardCharsets.UTF_8));
                msg.setDeliverTimeMs(due);
                org.apache.rocketmq.common.message.MessageQueue mq =
                    producer.fetchPublishMessageQueues(topic).stream()
                        .filter(q -> q.getQueueId() == queue).findFirst().orElseThrow();
                try {
                    SendResult r = producer.send(msg, mq);
                    Driver5.emit("sent", "i", i, "msgId", r.getMsgId(), "due", due, "status", r.getSendStatus().name());
                } catch (MQBrokerException e) {
                    Driver5.emit("refused", "i", i, "due", due, "code", e.getResponseCode(), "remark", e.getErrorMessage());
                }
            }
        } finally {
            producer.shutdown();
        }
    }
}
