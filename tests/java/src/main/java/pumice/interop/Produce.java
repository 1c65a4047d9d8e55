package pumice.interop;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * produce --topic T --count N --mode sync|async|oneway|batch|orderly [--group G] [--label L]
 * [--size BYTES] [--tags A,B] [--keys PREFIX|TEMPLATE] [--prop name=value ...] [--delay LEVEL]
 * [--shards K] [--batch N] [--vip true|false] [--namespace NS] [--instance I] [--trace true]
 * [--linger-ms MS] [--retries N] [--timeout-ms MS] [--interval-ms MS] [--poll-ms MS]
 * [--compress-type ZLIB|LZ4|ZSTD]
 *
 * <p>Message i has body Driver.body(label, i, size), tag tags[i % len], keys PREFIX-i (or the
 * template with {i} replaced), the properties given plus "i"=i, and in orderly mode sharding key
 * i % K (queue = key % queues).
 * Sync and orderly sends pause --interval-ms between messages.
 * Prints one "sent" line per message (per batch: "batch"), "error" lines, then "done".
 */
final class Produce {
    static void run(Driver.Args a) throws Exception {
        String topic = a.get("topic", "TopicTest");
        String mode = a.get("mode", "sync");
        int count = a.integer("count", 1);
        if (a.has("compress-type")) { // read when the producer is made: rocketmq.message.compressType
            System.setProperty("rocketmq.message.compressType", a.get("compress-type", "ZLIB"));
        }
        long interval = a.integer("interval-ms", 0);
        DefaultMQProducer p = new DefaultMQProducer(a.get("namespace", null), a.get("group", "PumiceInteropProducer"),
            Driver.rpcHook(a), a.bool("trace"), null);
        Driver.configure(p, a);
        p.setRetryTimesWhenSendFailed(a.integer("retries", 2));
        p.setRetryTimesWhenSendAsyncFailed(a.integer("retries", 2));
        p.setSendMsgTimeout(a.integer("timeout-ms", 5000));
        p.start();
        Driver.emit("started", "clientId", p.buildMQClientId());
        long t0 = System.currentTimeMillis();
        AtomicInteger errors = new AtomicInteger();
        List<Message> msgs = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            msgs.add(message(a, topic, i));
        }
        switch (mode) {
            case "sync" -> {
                for (int i = 0; i < count; i++) {
                    try {
                        sent(i, p.send(msgs.get(i)));
                    } catch (Exception e) {
                        error(i, e, errors);
                    }
                    Thread.sleep(interval);
                }
            }
            case "async" -> {
                CountDownLatch left = new CountDownLatch(count);
                for (int i = 0; i < count; i++) {
                    final int n = i;
                    p.send(msgs.get(i), new SendCallback() {
                        public void onSuccess(SendResult r) {
                            sent(n, r);
                            left.countDown();
                        }

                        public void onException(Throwable e) {
                            error(n, e, errors);
                            left.countDown();
                        }
                    });
                }
                if (!left.await(60, TimeUnit.SECONDS)) {
                    Driver.emit("error", "error", "async callbacks missing: " + left.getCount());
                }
            }
            case "oneway" -> {
                for (int i = 0; i < count; i++) {
                    p.sendOneway(msgs.get(i));
                    Driver.emit("sent", "i", i);
                }
                Thread.sleep(1000); // oneway writes are not awaited: let them leave before shutdown
            }
            case "batch" -> {
                int size = a.integer("batch", 10);
                for (int from = 0; from < count; from += size) {
                    List<Message> batch = msgs.subList(from, Math.min(count, from + size));
                    try {
                        SendResult r = p.send(batch);
                        Driver.emit("batch", "first", from, "n", batch.size(), "status", r.getSendStatus().name(),
                            "msgId", r.getMsgId(), "offsetMsgId", r.getOffsetMsgId(),
                            "queueId", r.getMessageQueue().getQueueId(), "queueOffset", r.getQueueOffset(),
                            "brokerName", r.getMessageQueue().getBrokerName(), "topic", r.getMessageQueue().getTopic());
                    } catch (Exception e) {
                        error(from, e, errors);
                    }
                }
            }
            case "orderly" -> {
                int shards = a.integer("shards", 4);
                for (int i = 0; i < count; i++) {
                    try {
                        sent(i, p.send(msgs.get(i), (mqs, msg, key) -> mqs.get((Integer) key % mqs.size()), i % shards));
                    } catch (Exception e) {
                        error(i, e, errors);
                    }
                    Thread.sleep(interval);
                }
            }
            default -> throw new IllegalArgumentException("unknown mode " + mode);
        }
        long ms = System.currentTimeMillis() - t0;
        Thread.sleep(a.integer("linger-ms", 0)); // e.g. for the trace dispatcher, which sends in the background
        p.shutdown(); // with trace on, this flushes the trace records left (for at most 500 ms)
        Driver.emit("done", "count", count, "errors", errors.get(), "ms", ms);
    }

    static Message message(Driver.Args a, String topic, int i) {
        Message m = new Message(topic, Driver.body(a.get("label", "m"), i, a.integer("size", 0)));
        String[] tags = a.get("tags", "").split(",");
        if (!tags[i % tags.length].isEmpty()) {
            m.setTags(tags[i % tags.length]);
        }
        if (a.has("keys")) { // PREFIX-i, or a template: "k-{i} shared" (keys are separated by spaces)
            String keys = a.get("keys", null);
            m.setKeys(keys.contains("{i}") ? keys.replace("{i}", Integer.toString(i)) : keys + "-" + i);
        }
        for (String prop : a.all("prop")) {
            int eq = prop.indexOf('=');
            m.putUserProperty(prop.substring(0, eq), prop.substring(eq + 1));
        }
        m.putUserProperty("i", Integer.toString(i));
        if (a.has("delay")) {
            m.setDelayTimeLevel(a.integer("delay", 0));
        }
        return m;
    }

    static void sent(int i, SendResult r) {
        Driver.emit("sent", "i", i, "status", r.getSendStatus().name(), "msgId", r.getMsgId(),
            "offsetMsgId", r.getOffsetMsgId(), "queueId", r.getMessageQueue().getQueueId(),
            "queueOffset", r.getQueueOffset(), "brokerName", r.getMessageQueue().getBrokerName(),
            "topic", r.getMessageQueue().getTopic(), "regionId", r.getRegionId(), "traceOn", r.isTraceOn(),
            "sentAt", System.currentTimeMillis());
    }

    static void error(int i, Throwable e, AtomicInteger errors) {
        errors.incrementAndGet();
        StringBuilder text = new StringBuilder(e.toString());
        for (Throwable c = e.getCause(); c != null && c != c.getCause(); c = c.getCause()) {
            text.append(" | caused by ").append(c); // the broker's answer (MQBrokerException) is a cause
        }
        Driver.emit("error", "i", i, "error", text.toString(), "at", System.currentTimeMillis());
    }
}
