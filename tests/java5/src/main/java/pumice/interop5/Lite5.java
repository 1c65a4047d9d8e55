package pumice.interop5;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.consumer.DefaultLitePullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageClientIDSetter;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.admin.ConsumeStats;
import org.apache.rocketmq.remoting.protocol.admin.OffsetWrapper;
import org.apache.rocketmq.remoting.protocol.admin.TopicOffset;
import org.apache.rocketmq.remoting.protocol.admin.TopicStatsTable;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * The RocketMQ 5.5.0 remoting client's lite pull consumer, batch producer, message trace and admin
 * stats against a broker, run by tests/interop/test_java5_remoting5.py as a process (JSON lines
 * through Driver5.emit).
 *
 * <pre>java -cp pumice-interop5.jar:CLASSPATH pumice.interop5.Lite5 SUBCOMMAND --name value ...</pre>
 *
 * litesub: subscribe mode, polls until --count messages ("received" each, then "done").
 * liteassign: assign mode, the --queue of --topic, seek to --seek, polls until --count messages.
 * batch: one batch of --count messages (--trace: with message trace); "sent" with the
 * SendResult's msgId and each message's own UNIQ_KEY.
 * push: a push consumer (--trace: with message trace), "received" per message, until "stop" on stdin.
 * stats: examineTopicStats(topic) and examineConsumeStats(group, topic), the overloads that ask each
 * broker of the route for GET_TOPIC_CONFIG (351): "topicStats" and "consumeStats", or "error".
 */
public final class Lite5 {
    private static final long DEADLINE_MS = 60_000;

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 1; i + 1 < argv.length; i += 2) {
            args.put(argv[i].substring(2), argv[i + 1]);
        }
        try {
            switch (argv[0]) {
                case "litesub" -> liteSubscribe(args);
                case "liteassign" -> liteAssign(args);
                case "batch" -> batch(args);
                case "push" -> push(args);
                case "stats" -> stats(args);
                default -> {
                    System.err.println("unknown subcommand " + argv[0]);
                    System.exit(2);
                }
            }
        } catch (Throwable e) {
            e.printStackTrace();
            Driver5.emit("error", "exception", e.toString());
            System.exit(1);
        }
        System.exit(0); // the client's non-daemon threads must not keep the JVM up
    }

    static void received(MessageExt m) {
        Driver5.emit("received", "queueId", m.getQueueId(), "queueOffset", m.getQueueOffset(), "msgId", m.getMsgId(),
            "body", new String(m.getBody(), StandardCharsets.UTF_8));
    }

    /** Polls until count messages came (or the deadline passed), printing each. */
    static void pollUntil(DefaultLitePullConsumer consumer, int count) {
        long deadline = System.currentTimeMillis() + DEADLINE_MS;
        int got = 0;
        while (got < count && System.currentTimeMillis() < deadline) {
            for (MessageExt m : consumer.poll(1000)) {
                received(m);
                got++;
            }
        }
    }

    static DefaultLitePullConsumer liteConsumer(Map<String, String> args) {
        DefaultLitePullConsumer consumer = new DefaultLitePullConsumer(args.get("group"));
        consumer.setNamesrvAddr(args.get("namesrv"));
        consumer.setInstanceName("java5-lite-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPullThreadNums(2);
        return consumer;
    }

    static void liteSubscribe(Map<String, String> args) throws Exception {
        DefaultLitePullConsumer consumer = liteConsumer(args);
        consumer.subscribe(args.get("topic"), "*");
        consumer.start();
        try {
            pollUntil(consumer, Integer.parseInt(args.get("count")));
            consumer.commitSync();
        } finally {
            consumer.shutdown();
        }
        Driver5.emit("done");
    }

    static void liteAssign(Map<String, String> args) throws Exception {
        DefaultLitePullConsumer consumer = liteConsumer(args);
        consumer.setAutoCommit(false);
        // from the queue's end until the seek: a pull of the old offset in flight when seek() runs
        // could otherwise still deliver its messages (the client's race, whatever the broker)
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
        consumer.start();
        try {
            int queue = Integer.parseInt(args.get("queue"));
            List<MessageQueue> mine = new ArrayList<>();
            for (MessageQueue mq : consumer.fetchMessageQueues(args.get("topic"))) {
                if (mq.getQueueId() == queue) {
                    mine.add(mq);
                }
            }
            consumer.assign(mine);
            consumer.seek(mine.get(0), Long.parseLong(args.get("seek")));
            pollUntil(consumer, Integer.parseInt(args.get("count")));
        } finally {
            consumer.shutdown();
        }
        Driver5.emit("done");
    }

    static void batch(Map<String, String> args) throws Exception {
        boolean trace = Boolean.parseBoolean(args.getOrDefault("trace", "false"));
        DefaultMQProducer producer = new DefaultMQProducer(args.get("group"), trace, null);
        producer.setNamesrvAddr(args.get("namesrv"));
        producer.setInstanceName("java5-batch-" + ProcessHandle.current().pid());
        producer.start();
        try {
            List<Message> msgs = new ArrayList<>();
            for (int i = 0; i < Integer.parseInt(args.get("count")); i++) {
                msgs.add(new Message(args.get("topic"), "TagB", ("batch-" + i).getBytes(StandardCharsets.UTF_8)));
            }
            SendResult r = producer.send(msgs);
            List<String> own = new ArrayList<>();
            for (Message m : msgs) {
                own.add(MessageClientIDSetter.getUniqID(m));
            }
            Driver5.emit("sent", "status", r.getSendStatus().name(), "msgId", r.getMsgId(), "own", own,
                "queueId", r.getMessageQueue().getQueueId());
            Thread.sleep(trace ? 6000 : 0); // the trace dispatcher sends its records in the background
        } finally {
            producer.shutdown();
        }
        Driver5.emit("done");
    }

    static void push(Map<String, String> args) throws Exception {
        boolean trace = Boolean.parseBoolean(args.getOrDefault("trace", "false"));
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(args.get("group"), trace, null);
        consumer.setNamesrvAddr(args.get("namesrv"));
        consumer.setInstanceName("java5-push-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPersistConsumerOffsetInterval(1000);
        consumer.subscribe(args.get("topic"), "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                received(m);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
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

    static void stats(Map<String, String> args) throws Exception {
        DefaultMQAdminExt admin = new DefaultMQAdminExt(10_000);
        admin.setNamesrvAddr(args.get("namesrv"));
        admin.setInstanceName("java5-stats-" + ProcessHandle.current().pid());
        admin.start();
        try {
            String topic = args.get("topic");
            Driver5.attempt("examineTopicStats", () -> {
                TopicStatsTable t = admin.examineTopicStats(topic);
                Map<String, Long> max = new TreeMap<>();
                for (Map.Entry<MessageQueue, TopicOffset> e : t.getOffsetTable().entrySet()) {
                    max.put(String.valueOf(e.getKey().getQueueId()), e.getValue().getMaxOffset());
                }
                Driver5.emit("topicStats", "maxOffsets", max);
            });
            Driver5.attempt("examineConsumeStats", () -> {
                ConsumeStats s = admin.examineConsumeStats(args.get("group"), topic);
                Map<String, Long> consumer = new TreeMap<>();
                for (Map.Entry<MessageQueue, OffsetWrapper> e : s.getOffsetTable().entrySet()) {
                    consumer.put(String.valueOf(e.getKey().getQueueId()), e.getValue().getConsumerOffset());
                }
                Driver5.emit("consumeStats", "consumerOffsets", consumer);
            });
        } finally {
            admin.shutdown();
        }
        Driver5.emit("done");
    }
}
