package pumice.v5grpc;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashSet;
import java.util.Set;
import java.util.TreeMap;
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
import org.apache.rocketmq.client.apis.producer.Transaction;
import org.apache.rocketmq.client.apis.producer.TransactionChecker;
import org.apache.rocketmq.client.apis.producer.TransactionResolution;

/**
 * Drives the official RocketMQ 5 Java client (rocketmq-client-java 5.0.8, gRPC) for the tests, with the
 * options and JSON events of the Python driver (tests/peers5/v5_python_driver.py):
 * {@code java -cp ... pumice.v5grpc.GrpcClient5 <subcommand> --endpoint H:P --topic T [options]}.
 *
 * <table>
 * <tr><th>subcommand</th><th>events</th></tr>
 * <tr><td>produce</td><td>{@code sent} per message (message_id, body, tag, keys, message_group,
 * delivery_timestamp ms, recall_handle), {@code recalled} / {@code recall_error} per RecallMessage
 * ({@code --recall-first N}: the first N sent), {@code committed} / {@code rolled_back} per transaction the client ends,
 * {@code checked} per check-back the TransactionChecker answers ({@code --transaction unknown})</td></tr>
 * <tr><td>simple-consume</td><td>{@code received} per message (message_id, body, attempt, tag, keys,
 * message_group, properties, delivery_timestamp), {@code acked}, {@code changed} (a new invisible duration),
 * {@code receive_error} / {@code ack_error} / {@code change_error}</td></tr>
 * <tr><td>push-consume</td><td>{@code consuming} when the listener is called, {@code consumed} when it
 * returns (result SUCCESS or FAILURE: the first {@code --fail-first} calls fail)</td></tr>
 * <tr><td>produce+simple-consume, produce+push-consume</td><td>both in one JVM (one start less): the
 * produce options (its count {@code --send-count}, default {@code --count}), then the consumer's</td></tr>
 * </table>
 *
 * Options: {@code --count --body-prefix --tag --keys K (repeat) --property k=v (repeat) --message-group
 * --delay-s --recall-first N --transaction commit|rollback|unknown --check-answer commit|rollback --await-checks N
 * --check-wait-s --group --tag-expr E | --sql E --invisible-s --await-s --batch --no-ack --ack-from-attempt N
 * --change-invisible-s --fail-first N --threads N --linger-s --max-s --allow-fewer --tls --timeout-s}.
 * Every event carries {@code t} (unix seconds); the run ends with {@code done} (exit 0) or {@code error}
 * (exit 2; 3 past --timeout-s, a watchdog). Loops are bounded in count and time.
 */
public final class GrpcClient5 {
    static final Set<String> FLAGS = Set.of("tls", "no-ack", "allow-fewer");
    static final Set<String> REPEATED = Set.of("keys", "property");
    static final int MAX_RECEIVE_ERRORS = 5; // in a row: a server refusing the request ends the run

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

    static String json(Object v) {
        if (v == null) {
            return "null";
        }
        if (v instanceof Number || v instanceof Boolean) {
            return v.toString();
        }
        if (v instanceof Map<?, ?> m) {
            List<String> parts = new ArrayList<>();
            for (Map.Entry<?, ?> e : new TreeMap<>(m).entrySet()) {
                parts.add(quote(e.getKey().toString()) + ": " + json(e.getValue()));
            }
            return "{" + String.join(", ", parts) + "}";
        }
        if (v instanceof Iterable<?> it) {
            List<String> parts = new ArrayList<>();
            for (Object x : it) {
                parts.add(json(x));
            }
            return "[" + String.join(", ", parts) + "]";
        }
        return quote(v.toString());
    }

    static synchronized void emit(String event, Object... kv) {
        StringBuilder b = new StringBuilder("{\"event\": ").append(quote(event));
        b.append(", \"t\": ").append(String.format("%.3f", System.currentTimeMillis() / 1000.0));
        for (int i = 0; i + 1 < kv.length; i += 2) {
            b.append(", ").append(quote(kv[i].toString())).append(": ").append(json(kv[i + 1]));
        }
        System.out.println(b.append('}'));
        System.out.flush();
    }

    static void fail(String message, int code) {
        emit("error", "message", message);
        System.err.println("GrpcClient5: " + message);
        Runtime.getRuntime().halt(code);
    }

    static final Map<String, List<String>> REPEATS = new HashMap<>();

    static Map<String, String> options(String[] args) {
        Map<String, String> out = new HashMap<>();
        for (int i = 1; i < args.length; i++) {
            if (!args[i].startsWith("--")) {
                fail("unexpected argument " + args[i], 2);
            }
            String key = args[i].substring(2);
            if (FLAGS.contains(key)) {
                out.put(key, "true");
            } else if (i + 1 < args.length) {
                String v = args[++i];
                out.put(key, v);
                if (REPEATED.contains(key)) {
                    REPEATS.computeIfAbsent(key, k -> new ArrayList<>()).add(v);
                }
            } else {
                fail("--" + key + " needs a value", 2);
            }
        }
        if (out.containsKey("sql") && out.containsKey("tag-expr")) {
            fail("--sql and --tag-expr exclude each other", 2);
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

    static double number(Map<String, String> o, String key, double fallback) {
        String v = o.get(key);
        try {
            return v == null ? fallback : Double.parseDouble(v);
        } catch (NumberFormatException e) {
            fail("--" + key + " takes a number, not " + v, 2);
            return fallback;
        }
    }

    static Object[] fields(MessageView m, Object... extra) {
        List<String> keys = new ArrayList<>(m.getKeys());
        Collections.sort(keys);
        Object[] kv = new Object[] {
            "message_id", m.getMessageId().toString(), "topic", m.getTopic(),
            "body", StandardCharsets.UTF_8.decode(m.getBody().duplicate()).toString(),
            "attempt", m.getDeliveryAttempt(), "tag", m.getTag().orElse(null), "keys", keys,
            "message_group", m.getMessageGroup().orElse(null),
            "delivery_timestamp", m.getDeliveryTimestamp().orElse(null), "born_timestamp", m.getBornTimestamp(),
            "properties", m.getProperties()};
        Object[] all = new Object[kv.length + extra.length];
        System.arraycopy(extra, 0, all, 0, extra.length);
        System.arraycopy(kv, 0, all, extra.length, kv.length);
        return all;
    }

    static FilterExpression filter(Map<String, String> o) {
        if (o.containsKey("sql")) {
            return new FilterExpression(o.get("sql"), FilterExpressionType.SQL92);
        }
        return new FilterExpression(o.getOrDefault("tag-expr", "*"), FilterExpressionType.TAG);
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            fail("usage: GrpcClient5 <produce|simple-consume|push-consume|produce+simple-consume|"
                + "produce+push-consume> --endpoint H:P --topic T ...", 2);
        }
        Map<String, String> o = options(args);
        double timeoutS = number(o, "timeout-s", 120);
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
            .setRequestTimeout(Duration.ofSeconds((long) number(o, "request-timeout-s", 3)))
            .build();
        String topic = require(o, "topic");
        int count = (int) number(o, "count", 1);
        try {
            switch (args[0]) {
                case "produce" -> produce(provider, config, topic, count, o);
                case "simple-consume" -> simpleConsume(provider, config, topic, count, o);
                case "push-consume" -> pushConsume(provider, config, topic, count, o);
                case "produce+simple-consume" -> {
                    produce(provider, config, topic, (int) number(o, "send-count", count), o);
                    simpleConsume(provider, config, topic, count, o);
                }
                case "produce+push-consume" -> {
                    produce(provider, config, topic, (int) number(o, "send-count", count), o);
                    pushConsume(provider, config, topic, count, o);
                }
                default -> fail("unknown subcommand " + args[0], 2);
            }
        } catch (Exception e) {
            fail(args[0] + ": " + e.getClass().getSimpleName() + ": " + e.getMessage(), 2);
        }
        emit("done");
        Runtime.getRuntime().halt(0); // the client's threads need not be waited for
    }

    /** Answers a check-back (an orphaned transaction) with --check-answer; counts the calls. */
    static final class Checker implements TransactionChecker {
        final String answer;
        int calls;

        Checker(String answer) {
            this.answer = answer;
        }

        @Override
        public TransactionResolution check(MessageView m) {
            emit("checked", fields(m, "answer", answer));
            synchronized (this) {
                calls++;
                notifyAll();
            }
            return answer.equals("commit") ? TransactionResolution.COMMIT : TransactionResolution.ROLLBACK;
        }
    }

    static void produce(ClientServiceProvider provider, ClientConfiguration config, String topic, int count,
        Map<String, String> o) throws Exception {
        String prefix = o.getOrDefault("body-prefix", "m");
        String group = o.get("message-group");
        String tag = o.getOrDefault("tag", "java");
        String transaction = o.get("transaction");
        if (transaction != null && !Set.of("commit", "rollback", "unknown").contains(transaction)) {
            fail("--transaction is commit, rollback or unknown, not " + transaction, 2);
        }
        List<String> keys = REPEATS.getOrDefault("keys", List.of());
        int recallFirst = (int) number(o, "recall-first", 0); // RecallMessage of the first N (delay messages)
        Checker checker = new Checker(o.getOrDefault("check-answer", "commit"));
        var builder = provider.newProducerBuilder().setClientConfiguration(config).setTopics(topic);
        if (transaction != null) {
            builder.setTransactionChecker(checker);
        }
        try (Producer producer = builder.build()) {
            for (int i = 0; i < count; i++) {
                MessageBuilder b = provider.newMessageBuilder().setTopic(topic)
                    .setBody((prefix + i).getBytes(StandardCharsets.UTF_8)).setTag(tag);
                if (!keys.isEmpty()) {
                    b.setKeys(keys.toArray(new String[0]));
                }
                for (String kv : REPEATS.getOrDefault("property", List.of())) {
                    int eq = kv.indexOf('=');
                    if (eq <= 0) {
                        fail("--property takes k=v, not " + kv, 2);
                    }
                    b.addProperty(kv.substring(0, eq), kv.substring(eq + 1));
                }
                if (group != null) {
                    b.setMessageGroup(group);
                }
                Long due = null;
                if (o.containsKey("delay-s")) {
                    due = System.currentTimeMillis() + (long) (number(o, "delay-s", 0) * 1000); // ms: what it sends
                    b.setDeliveryTimestamp(due);
                }
                Message m = b.build();
                Transaction tx = transaction != null ? producer.beginTransaction() : null;
                SendReceipt receipt = tx != null ? producer.send(m, tx) : producer.send(m);
                String id = receipt.getMessageId().toString();
                List<String> sortedKeys = new ArrayList<>(keys);
                Collections.sort(sortedKeys);
                emit("sent", "message_id", id, "body", prefix + i, "tag", tag, "keys", sortedKeys,
                    "message_group", group, "delivery_timestamp", due, "recall_handle", receipt.getRecallHandle());
                if (i < recallFirst) {
                    try {
                        emit("recalled", "message_id", producer.recallMessage(topic, receipt.getRecallHandle())
                            .getMessageId().toString());
                    } catch (Exception e) {
                        emit("recall_error", "message_id", id, "message", e.getClass().getSimpleName() + ": "
                            + e.getMessage());
                    }
                }
                if ("commit".equals(transaction)) {
                    tx.commit();
                    emit("committed", "message_id", id);
                } else if ("rollback".equals(transaction)) {
                    tx.rollback();
                    emit("rolled_back", "message_id", id);
                }
            }
            if ("unknown".equals(transaction)) {
                int want = (int) number(o, "await-checks", count);
                double waitS = number(o, "check-wait-s", 60);
                long deadline = System.nanoTime() + (long) (waitS * 1e9);
                synchronized (checker) {
                    while (checker.calls < want && System.nanoTime() < deadline) {
                        checker.wait(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
                    }
                }
                if (checker.calls < want) {
                    fail(checker.calls + " check-backs of " + want + " within " + waitS + "s", 2);
                }
                // the EndTransaction of the last answer goes out after check() returns
                Thread.sleep((long) (number(o, "linger-s", 1) * 1000));
            }
        }
    }

    static void simpleConsume(ClientServiceProvider provider, ClientConfiguration config, String topic, int count,
        Map<String, String> o) throws Exception {
        String group = require(o, "group");
        double maxS = number(o, "max-s", 60);
        double lingerS = number(o, "linger-s", 0);
        boolean ack = !o.containsKey("no-ack");
        int ackFrom = (int) number(o, "ack-from-attempt", 1);
        Duration invisible = Duration.ofMillis((long) (number(o, "invisible-s", 20) * 1000));
        Duration change = o.containsKey("change-invisible-s")
            ? Duration.ofMillis((long) (number(o, "change-invisible-s", 0) * 1000)) : null;
        int batch = (int) number(o, "batch", 16);
        try (SimpleConsumer consumer = provider.newSimpleConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group).setAwaitDuration(Duration.ofMillis((long) (number(o, "await-s", 5) * 1000)))
            .setSubscriptionExpressions(Collections.singletonMap(topic, filter(o))).build()) {
            long deadline = System.nanoTime() + (long) (maxS * 1e9);
            long end = deadline;
            boolean lingering = false;
            int received = 0;
            int acked = 0;
            int errors = 0;
            Set<String> seen = new HashSet<>();
            while (System.nanoTime() < end) {
                if (!lingering && received >= count) {
                    lingering = true;
                    end = System.nanoTime() + (long) (lingerS * 1e9);
                    continue;
                }
                List<MessageView> messages;
                try {
                    messages = consumer.receive(batch, invisible);
                    errors = 0;
                } catch (Exception e) {
                    emit("receive_error", "message", e.getClass().getSimpleName() + ": " + e.getMessage());
                    if (++errors >= MAX_RECEIVE_ERRORS) {
                        fail(errors + " receive errors in a row, the last: " + e, 2);
                    }
                    Thread.sleep(500);
                    continue;
                }
                for (MessageView m : messages) {
                    received++;
                    String id = m.getMessageId().toString();
                    emit("received", fields(m, "group", group));
                    if (ack && m.getDeliveryAttempt() >= ackFrom) {
                        try {
                            consumer.ack(m);
                            acked++;
                            emit("acked", "message_id", id, "attempt", m.getDeliveryAttempt());
                        } catch (Exception e) {
                            emit("ack_error", "message_id", id, "message", e.getClass().getSimpleName() + ": "
                                + e.getMessage());
                        }
                    } else if (change != null && !seen.contains(id)) {
                        try {
                            consumer.changeInvisibleDuration(m, change);
                            emit("changed", "message_id", id, "invisible_s", change.toMillis() / 1000.0);
                        } catch (Exception e) {
                            emit("change_error", "message_id", id, "message", e.getClass().getSimpleName() + ": "
                                + e.getMessage());
                        }
                    }
                    seen.add(id);
                }
            }
            if (received < count && !o.containsKey("allow-fewer")) {
                fail("received " + received + " of " + count + " messages within " + maxS + "s", 2);
            }
            emit("consumer", "received", received, "acked", acked);
        }
    }

    static void pushConsume(ClientServiceProvider provider, ClientConfiguration config, String topic, int count,
        Map<String, String> o) throws Exception {
        String group = require(o, "group");
        double maxS = number(o, "max-s", 60);
        int failFirst = (int) number(o, "fail-first", 0);
        AtomicInteger calls = new AtomicInteger();
        AtomicInteger successes = new AtomicInteger();
        Object done = new Object();
        // not closed: close() waits out the receive calls' long polling (tens of seconds); main's
        // halt ends the process as soon as the count is reached
        PushConsumer consumer = provider.newPushConsumerBuilder().setClientConfiguration(config)
            .setConsumerGroup(group).setSubscriptionExpressions(Collections.singletonMap(topic, filter(o)))
            .setConsumptionThreadCount((int) number(o, "threads", 4))
            .setMessageListener(m -> {
                emit("consuming", "group", group, "message_id", m.getMessageId().toString(), "attempt",
                    m.getDeliveryAttempt());
                boolean ok = calls.incrementAndGet() > failFirst;
                emit("consumed", fields(m, "group", group, "result", ok ? "SUCCESS" : "FAILURE"));
                synchronized (done) {
                    if (ok) {
                        successes.incrementAndGet();
                    }
                    done.notifyAll();
                }
                return ok ? ConsumeResult.SUCCESS : ConsumeResult.FAILURE;
            }).build();
        long deadline = System.nanoTime() + (long) (maxS * 1e9);
        synchronized (done) {
            while (successes.get() < count && System.nanoTime() < deadline) {
                done.wait(Math.max(1, (deadline - System.nanoTime()) / 1_000_000));
            }
        }
        Thread.sleep((long) (number(o, "linger-s", 0) * 1000)); // later calls (redeliveries) reported too
        if (successes.get() < count && !o.containsKey("allow-fewer")) {
            fail(successes.get() + " successful consumptions of " + count + " within " + maxS + "s", 2);
        }
        emit("consumer", "group", consumer.getConsumerGroup(), "calls", calls.get(), "successes", successes.get());
    }
}
