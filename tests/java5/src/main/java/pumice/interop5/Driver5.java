package pumice.interop5;

import com.alibaba.fastjson2.JSON;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.admin.OffsetWrapper;
import org.apache.rocketmq.remoting.protocol.admin.TopicOffset;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The RocketMQ 5.5.0 remoting client and tools (fastjson2) against a broker, run by
 * tests/interop/test_java5_wire.py as a process.
 *
 * <pre>java -cp pumice-interop5.jar:CLASSPATH pumice.interop5.Driver5 SUBCOMMAND --name value ...</pre>
 *
 * admin: examineTopicStats and examineConsumeStats (--group) of each broker of the route, and,
 * with --resetTo, resetOffsetByTimestamp
 * (forced); one JSON line each ("topicStats", "consumeStats", "reset": offsets by queue id), or
 * "error" with the exception. push: a push consumer (5.x) that prints "received" per message and
 * stops on "stop" or end of input on stdin.
 */
public final class Driver5 {
    private static final Object OUT = new Object();

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            args.put(argv[i].substring(2), argv[i + 1]);
        }
        try {
            switch (argv[0]) {
                case "admin" -> admin(args);
                case "push" -> push(args);
                default -> {
                    System.err.println("unknown subcommand " + argv[0]);
                    System.exit(2);
                }
            }
        } catch (Throwable e) {
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0); // the client's non-daemon threads must not keep the JVM up
    }

    /** One JSON line: "event" first, then the pairs given (maps keyed by strings: fastjson2 writes int keys bare). */
    static void emit(String event, Object... pairs) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("event", event);
        for (int i = 0; i + 1 < pairs.length; i += 2) {
            m.put((String) pairs[i], pairs[i + 1]);
        }
        String line = JSON.toJSONString(m);
        synchronized (OUT) {
            System.out.println(line);
            System.out.flush();
        }
    }

    interface Call {
        void run() throws Exception;
    }

    /** Runs one admin call; a failure is an "error" line naming the call, and the next call still runs. */
    static void attempt(String what, Call call) {
        try {
            call.run();
        } catch (Throwable e) {
            Throwable root = e;
            while (root.getCause() != null) {
                root = root.getCause();
            }
            emit("error", "call", what, "exception", e.toString(), "cause", root.toString());
        }
    }

    static void admin(Map<String, String> args) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt(10_000);
        admin.setNamesrvAddr(args.get("namesrv"));
        admin.setInstanceName("java5-admin-" + ProcessHandle.current().pid());
        admin.start();
        try {
            String topic = args.get("topic");
            String group = args.get("group");
            // by broker address: examineTopicStats(topic) and examineConsumeStats(group) first ask
            // GET_TOPIC_CONFIG (351), a code 4.9 brokers do not have
            attempt("examineTopicStats", () -> {
                Map<String, Long> max = new TreeMap<>();
                for (BrokerData b : admin.examineTopicRouteInfo(topic).getBrokerDatas()) {
                    TopicStatsTable t = admin.examineTopicStats(b.selectBrokerAddr(), topic);
                    for (Map.Entry<MessageQueue, TopicOffset> e : t.getOffsetTable().entrySet()) {
                        max.put(String.valueOf(e.getKey().getQueueId()), e.getValue().getMaxOffset());
                    }
                }
                emit("topicStats", "maxOffsets", max);
            });
            attempt("examineConsumeStats", () -> {
                Map<String, Long> consumer = new TreeMap<>();
                for (BrokerData b : admin.examineTopicRouteInfo(topic).getBrokerDatas()) {
                    ConsumeStats s = admin.examineConsumeStats(b.selectBrokerAddr(), group, topic, 10_000);
                    for (Map.Entry<MessageQueue, OffsetWrapper> e : s.getOffsetTable().entrySet()) {
                        consumer.put(String.valueOf(e.getKey().getQueueId()), e.getValue().getConsumerOffset());
                    }
                }
                emit("consumeStats", "consumerOffsets", consumer);
            });
            if (args.containsKey("resetTo")) {
                attempt("resetOffsetByTimestamp", () -> {
                    Map<MessageQueue, Long> table =
                        admin.resetOffsetByTimestamp(topic, group, Long.parseLong(args.get("resetTo")), true);
                    Map<String, Long> offsets = new TreeMap<>();
                    for (Map.Entry<MessageQueue, Long> e : table.entrySet()) {
                        offsets.put(String.valueOf(e.getKey().getQueueId()), e.getValue());
                    }
                    emit("reset", "offsets", offsets);
                });
            }
        } finally {
            admin.shutdown();
        }
        emit("done");
    }

    static void push(Map<String, String> args) throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group"));
        consumer.setNamesrvAddr(args.get("namesrv"));
        consumer.setInstanceName("java5-push-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPersistConsumerOffsetInterval(1000);
        consumer.subscribe(args.get("topic"), "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                emit("received", "queueId", m.getQueueId(), "queueOffset", m.getQueueOffset(),
                    "body", new String(m.getBody(), StandardCharsets.UTF_8));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        emit("started");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null && !line.trim().equals("stop")) {
            // wait for the test
        }
        consumer.shutdown();
        emit("stopped");
    }
}
