package pumice.v5grpc;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

/**
 * Drives the official RocketMQ 5 Java client (rocketmq-client-java 5.0.8, gRPC) for the tests:
 * {@code java -cp ... pumice.v5grpc.GrpcClient5 <produce|simple-consume|push-consume> --endpoint H:P
 * --topic T [--group G] [--count N] [--message-group G] [--body-prefix P] [--max-s S] [--tls]}.
 * One JSON object per line and event ({@code sent}, {@code received}, {@code acked}, {@code consumed}),
 * then {@code done} (exit 0) or {@code error} (exit 2; 3 past --timeout-s, a watchdog). Loops are
 * bounded in count and time.
 */
public final class GrpcClient5 {
    private GrpcClient5() {
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\').append(c);
            } else if (c < 0x20) {
                b.append(String.format("\\u%04x", (int) c));
            } else {
                b.append(c);
            }
        }
        return b.append('"').toString();
    }

    static synchronized void emit(String event, Object... kv) {
        StringBuilder b = new StringBuilder("{\"event\": ").append(quote(event));
        for (int i = 0; i + 1 < kv.length; i += 2) {
            Object v = kv[i + 1];
            String value = v == null ? "null" : v instanceof Number || v instanceof Boolean ? v.toString() : quote(v.toString());
            b.append(", ").append(quote(kv[i].toString())).append(": ").append(value);
        }
        System.out.println(b.append('}'));
        System.out.flush();
    }

    static void fail(String message, int code) {
        emit("error", "message", message);
        System.err.println("GrpcClient5: " + message);
        Runtime.getRuntime().halt(code);
    }

    static Map<String, String> options(String[] args) {
        Map<String, String> out = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            if (!args[i].startsWith("--")) {
                fail("unexpected argument " + args[i], 2);
            }
            String key = args[i].substring(2);
            if (key.equals("tls")) {
                out.put(key, "true");
            } else if (i + 1 < args.length) {
                out.put(key, args[++i]);
            } else {
                fail("--" + key + " needs a value", 2);
            }
        }
        return out;
    }

    static String require(Map<String, String> o, String key) {
        String v = o.get(key);
        if (v == null) {
            fail("--" + key + " is required", 2);
        }
        return v;
    }

    static void fields(MessageView m, String event, Object... extra) {
        Object[] kv = new Object[] {
            "message_id", m.getMessageId().toString(), "topic", m.getTopic(),
            "body", StandardCharsets.UTF_8.decode(m.getBody()).toString(),
            "tag", m.getTag().orElse(null), "message_group", m.getMessageGroup().orElse(null),
            "attempt", m.getDeliveryAttempt()};
        Object[] all = new Object[kv.length + extra.length];
        System.arraycopy(kv, 0, all, 0, kv.length);
        System.arraycopy(extra, 0, all, kv.length, extra.length);
        emit(event, all);
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            fail("usage: GrpcClient5 <produce|simple-consume|push-consume> --endpoint H:P --topic T ...", 2);
        }
        Map<String, String> o = options(args);
        double timeoutS = Double.parseDouble(o.getOrDefault("timeout-s", "120"));
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep((long) (timeoutS * 1000));
                fail("timed out after " + timeoutS + "s (" + args[0] + ")", 3);
            } catch (InterruptedException e) {
                // ended
            }
        });
        watchdog.setDaemon(true);
        watchdog.start();
        ClientServiceProvider provider = ClientServiceProvider.loadService();
        ClientConfiguration config = ClientConfiguration.newBuilder()
            .setEndpoints(require(o, "endpoint"))
            .enableSsl(o.containsKey("tls"))
            .setRequestTimeout(Duration.ofSeconds(Long.parseLong(o.getOrDefault("request-timeout-s", "3"))))
            .build();
        String topic = require(o, "topic");
        int count = Integer.parseInt(o.getOrDefault("count", "1"));
        double maxS = Double.parseDouble(o.getOrDefault("max-s", "60"));
        try {
            switch (args[0]) {
                case "produce" -> produce(provider, config, topic, count, o);
                case "simple-consume" -> simpleConsume(provider, config, topic, count, maxS, require(o, "group"));
                case "push-consume" -> pushConsume(provider, config, topic, count, maxS, require(o, "group"));
                default -> fail("unknown subcommand " + args[0], 2);
            }
        } catch (Exception e) {
            fail(args[0] + ": " + e.getClass().getSimpleName() + ": " + e.getMessage(), 2);
        }
        emit("done");
        Runtime.getRuntime().halt(0); // the client's threads need not be waited for
    }

    static void produce(ClientServiceProvider provider, ClientConfiguration config, String topic, int count,
        Map<String, String> o) throws Exception {
        String prefix = o.getOrDefault("body-prefix", "m");
        String group = o.get("message-group");
        try (Producer producer = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic)
            .build()) {
            for (int i = 0; i < count; i++) {
                MessageBuilder b = provider.newMessageBuilder().setTopic(topic)
                    .setBody((prefix + i).getBytes(StandardCharsets.UTF_8)).setTag(o.getOrDefault("tag", "java"));
                if (group != null) {
                    b.setMessageGroup(group);
                }
                Message m = b.build();
                SendReceipt receipt = producer.send(m);
                emit("sent", "message_id", receipt.getMessageId().toString(), "body", prefix + i,
                    "message_group", group);
            }
        }
    }

    static void simpleConsume(ClientServiceProvider provider, ClientConfiguration config, String topic, int count,
        double maxS, String group) throws Exception {
        FilterExpression all = new FilterExpression("*", FilterExpressionType.TAG);
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group).setAwaitDuration(Duration.ofSeconds(5))
            .setSubscriptionExpressions(Collections.singletonMap(topic, all)).build()) {
            long deadline = System.nanoTime() + (long) (maxS * 1e9);
            int acked = 0;
            while (acked < count && System.nanoTime() < deadline) {
                List<MessageView> batch = consumer.receive(16, Duration.ofSeconds(30));
                for (MessageView m : batch) {
                    fields(m, "received");
                    consumer.ack(m);
                    acked++;
                    emit("acked", "message_id", m.getMessageId().toString());
                }
            }
            if (acked < count) {
                fail(acked + " acked of " + count + " within " + maxS + "s", 2);
            }
        }
    }

    static void pushConsume(ClientServiceProvider provider, ClientConfiguration config, String topic, int count,
        double maxS, String group) throws Exception {
        AtomicInteger consumed = new AtomicInteger();
        Object done = new Object();
        FilterExpression all = new FilterExpression("*", FilterExpressionType.TAG);
        // not closed: close() waits out the receive calls' long polling (tens of seconds); main's
        // halt ends the process as soon as the count is reached
        PushConsumer consumer = provider.newPushConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group).setSubscriptionExpressions(Collections.singletonMap(topic, all))
            .setMessageListener(m -> {
                fields(m, "consumed", "result", "SUCCESS");
                synchronized (done) {
                    consumed.incrementAndGet();
                    done.notifyAll();
                }
                return ConsumeResult.SUCCESS;
            }).build();
        long deadline = System.nanoTime() + (long) (maxS * 1e9);
        synchronized (done) {
            while (consumed.get() < count && System.nanoTime() < deadline) {
                done.wait(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
            }
        }
        if (consumed.get() < count) {
            fail(consumed.get() + " consumed of " + count + " within " + maxS + "s", 2);
        }
        emit("consumer", "group", consumer.getConsumerGroup());
    }
}
