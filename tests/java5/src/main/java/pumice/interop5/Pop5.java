package pumice.interop5;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageRequestMode;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The RocketMQ 5.5.0 remoting push consumer in POP mode against a broker, run by
 * tests/integration/test_pop_java5.py as a process.
 *
 * <pre>java -cp pumice-interop5.jar:CLASSPATH pumice.interop5.Pop5 push --namesrv A --broker B --topic T --group G --fail PREFIX</pre>
 *
 * Sets the group's mode on the topic to POP (DefaultMQAdminExt.setMessageRequestMode, what
 * mqadmin setConsumeMode -m POP sends: SET_MESSAGE_REQUEST_MODE), then starts a push consumer
 * with clientRebalance off (it asks the broker for its queues, QUERY_ASSIGNMENT, and pops what
 * the answer says to pop). Prints "modeSet", "started", then "received" per message (body,
 * reconsumeTimes, whether it was popped: a POP_CK handle); a body starting with the --fail
 * prefix is answered RECONSUME_LATER the first time (the client then changes its invisible
 * time). Stops on "stop" or end of input on stdin.
 */
public final class Pop5 {
    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            args.put(argv[i].substring(2), argv[i + 1]);
        }
        try {
            if (!"push".equals(argv[0])) {
                System.err.println("unknown subcommand " + argv[0]);
                System.exit(2);
            }
            push(args);
        } catch (Throwable e) {
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0); // the client's non-daemon threads must not keep the JVM up
    }

    static void push(Map<String, String> args) throws Exception {
        String topic = args.get("topic");
        String group = args.get("group");
        String fail = args.getOrDefault("fail", "\u0000");
        DefaultMQAdminExt admin = new DefaultMQAdminExt(10_000);
        admin.setNamesrvAddr(args.get("namesrv"));
        admin.setInstanceName("pop5-admin-" + ProcessHandle.current().pid());
        admin.start();
        try {
            admin.setMessageRequestMode(args.get("broker"), topic, group, MessageRequestMode.POP, 0, 10_000);
        } finally {
            admin.shutdown();
        }
        Driver5.emit("modeSet");

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(args.get("namesrv"));
        consumer.setInstanceName("pop5-push-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setClientRebalance(false);
        consumer.setPopInvisibleTime(20_000);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            ConsumeConcurrentlyStatus status = ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            for (MessageExt m : msgs) {
                String body = new String(m.getBody(), StandardCharsets.UTF_8);
                Driver5.emit("received", "body", body, "reconsumeTimes", m.getReconsumeTimes(),
                    "popped", m.getProperty("POP_CK") != null, "topic", m.getTopic());
                if (body.startsWith(fail) && m.getReconsumeTimes() == 0) {
                    status = ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
            }
            return status;
        });
        consumer.start();
        Driver5.emit("started");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
            // wait for the test
        }
        consumer.shutdown();
        Driver5.emit("stopped");
    }
}
