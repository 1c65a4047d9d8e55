package pumice.bench;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPullConsumer;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * A benchmark driver on the official RocketMQ Java client (4.9.8), the kind of loops rocketmq-example's
 * benchmark programs run, written for bench/peers/native_clients.py:
 *
 * <pre>
 * produce --namesrv A --topic T --messages N --seconds S [--threads 64] [--clients 4] [--size 1024]
 *         [--batch 1] [--warmup W --warmup-topic T2]
 *     N messages (or S seconds, whichever first) from --threads threads, each doing synchronous sends
 *     (one message, or a batch of --batch) over --clients producer instances (thread i uses client
 *     i % clients; each instance has its own connection). W untimed messages to T2 first.
 * push    --namesrv A --topic T --messages N --seconds S [--pull-batch 32]
 *     a DefaultMQPushConsumer of a new group from the first offset, until N messages or S seconds;
 *     timed from its first message (its start-up and rebalance are the client's, not the broker's).
 * pull    --namesrv A --topic T --messages N --seconds S [--pull-batch 32]
 *     one thread a queue, DefaultMQPullConsumer.pull from offset 0 to the queue's end, until N or S.
 * </pre>
 *
 * Stdout: the line {@code START} when the timed part begins (the caller samples the broker's CPU
 * there), then one JSON line when it ends:
 *
 * <pre>
 * key        value
 * mode       produce | push | pull
 * msgs       messages acknowledged SEND_OK (produce) or received (push, pull)
 * failed     sends that threw or did not answer SEND_OK (their messages are not in msgs)
 * sends      send calls (a batch is one)
 * seconds    wall time of the timed part
 * msg_s      msgs / seconds
 * rt_us      produce: {"p50", "p99", "p999", "max", "mean"} of each send's round trip, microseconds
 * </pre>
 */
public final class RocketMQBench {
    private RocketMQBench() {}

    private static final class Args {
        final Map<String, String> kv = new HashMap<>();

        Args(String[] argv, int from) {
            for (int i = from; i + 1 < argv.length; i += 2) {
                if (!argv[i].startsWith("--")) {
                    throw new IllegalArgumentException("expected --key value, got " + argv[i]);
                }
                kv.put(argv[i].substring(2), argv[i + 1]);
            }
        }

        String str(String key, String dflt) {
            String v = kv.get(key);
            if (v == null && dflt == null) {
                throw new IllegalArgumentException("--" + key + " is required");
            }
            return v == null ? dflt : v;
        }

        int num(String key, int dflt) {
            return Integer.parseInt(str(key, Integer.toString(dflt)));
        }
    }

    /** A growable array of longs: one per thread, merged at the end (no locking on the hot path). */
    private static final class Longs {
        long[] a = new long[1024];
        int n;

        void add(long v) {
            if (n == a.length) {
                a = Arrays.copyOf(a, n * 2);
            }
            a[n++] = v;
        }
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            System.err.println("usage: RocketMQBench produce|push|pull --namesrv host:port --topic T ...");
            System.exit(2);
        }
        Args a = new Args(argv, 1);
        String result;
        switch (argv[0]) {
            case "produce":
                result = produce(a);
                break;
            case "push":
                result = push(a);
                break;
            case "pull":
                result = pull(a);
                break;
            default:
                System.err.println("unknown command " + argv[0]);
                System.exit(2);
                return;
        }
        System.out.println(result);
        System.out.flush();
        System.exit(0); // the clients' shutdown can linger on timers; the figures are out
    }

    private static String unique(String what) {
        return what + "_" + ProcessHandle.current().pid() + "_" + System.nanoTime();
    }

    private static String produce(Args a) throws Exception {
        String namesrv = a.str("namesrv", null);
        String topic = a.str("topic", null);
        int total = a.num("messages", 100_000);
        long limitNs = TimeUnit.SECONDS.toNanos(a.num("seconds", 60));
        int threads = a.num("threads", 64);
        int clients = Math.max(1, Math.min(a.num("clients", 4), threads));
        int size = a.num("size", 1024);
        int batch = Math.max(1, a.num("batch", 1));
        int warmup = a.num("warmup", 0);
        String warmupTopic = a.str("warmup-topic", topic);

        Random rng = new Random(20261126L);
        byte[][] bodies = new byte[4096][];
        for (int i = 0; i < bodies.length; i++) {
            bodies[i] = new byte[size];
            rng.nextBytes(bodies[i]);
        }
        DefaultMQProducer[] producers = new DefaultMQProducer[clients];
        String group = unique("bench_producer");
        for (int i = 0; i < clients; i++) {
            DefaultMQProducer p = new DefaultMQProducer(group);
            p.setNamesrvAddr(namesrv);
            p.setInstanceName(unique("p" + i));
            p.setSendMsgTimeout(10_000);
            p.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE); // the same bytes for every broker
            p.start();
            producers[i] = p;
        }

        AtomicLong warmClaimed = new AtomicLong();
        AtomicLong claimed = new AtomicLong();
        AtomicLong ok = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        AtomicLong sends = new AtomicLong();
        long[] startedAt = new long[1];
        // every thread done with its warm-up; then the timed part starts at once for all of them
        CyclicBarrier go = new CyclicBarrier(threads, () -> {
            System.out.println("START");
            System.out.flush();
            startedAt[0] = System.nanoTime();
        });
        Longs[] rts = new Longs[threads];
        Thread[] workers = new Thread[threads];
        for (int t = 0; t < threads; t++) {
            final int id = t;
            rts[t] = new Longs();
            workers[t] = new Thread(() -> {
                DefaultMQProducer p = producers[id % clients];
                int next = id * 97;
                while (warmClaimed.getAndAdd(batch) < warmup) {
                    try {
                        sendOne(p, warmupTopic, bodies, next, batch);
                    } catch (Exception e) {
                        // warm-up only: its failures are not figures
                    }
                    next += batch;
                }
                try {
                    go.await();
                } catch (Exception e) {
                    return;
                }
                long deadline = startedAt[0] + limitNs;
                Longs mine = rts[id];
                while (System.nanoTime() < deadline) {
                    long first = claimed.getAndAdd(batch);
                    if (first >= total) {
                        break;
                    }
                    int k = (int) Math.min(batch, total - first); // the last batch may be short
                    long t0 = System.nanoTime();
                    boolean good;
                    try {
                        good = sendOne(p, topic, bodies, next, k);
                    } catch (Exception e) {
                        good = false;
                    }
                    long rt = System.nanoTime() - t0;
                    sends.incrementAndGet();
                    if (good) {
                        ok.addAndGet(k);
                        mine.add(rt);
                    } else {
                        failed.incrementAndGet();
                    }
                    next += batch;
                }
            }, "bench-producer-" + t);
            workers[t].start();
        }
        long joinBy = System.nanoTime() + limitNs + TimeUnit.SECONDS.toNanos(120);
        for (Thread w : workers) {
            w.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(joinBy - System.nanoTime())));
        }
        double seconds = (System.nanoTime() - startedAt[0]) / 1e9;
        int n = 0;
        for (Longs l : rts) {
            n += l.n;
        }
        long[] all = new long[n];
        int at = 0;
        for (Longs l : rts) {
            System.arraycopy(l.a, 0, all, at, l.n);
            at += l.n;
        }
        Arrays.sort(all);
        for (DefaultMQProducer p : producers) {
            p.shutdown();
        }
        double sum = 0;
        for (long v : all) {
            sum += v;
        }
        return String.format(Locale.ROOT,
                "{\"mode\": \"produce\", \"batch\": %d, \"threads\": %d, \"clients\": %d, \"size\": %d, "
                        + "\"msgs\": %d, \"failed\": %d, \"sends\": %d, \"seconds\": %.6f, \"msg_s\": %.1f, "
                        + "\"rt_us\": {\"p50\": %.1f, \"p99\": %.1f, \"p999\": %.1f, \"max\": %.1f, \"mean\": %.1f}}",
                batch, threads, clients, size, ok.get(), failed.get(), sends.get(), seconds, ok.get() / seconds,
                pct(all, 0.50), pct(all, 0.99), pct(all, 0.999), n > 0 ? all[n - 1] / 1e3 : 0.0,
                n > 0 ? sum / n / 1e3 : 0.0);
    }

    /** One synchronous send of {@code k} messages (one, or a batch); true when SEND_OK. */
    private static boolean sendOne(DefaultMQProducer p, String topic, byte[][] bodies, int from, int k)
            throws Exception {
        SendResult r;
        if (k == 1) {
            r = p.send(new Message(topic, bodies[Math.floorMod(from, bodies.length)]));
        } else {
            List<Message> msgs = new ArrayList<>(k);
            for (int i = 0; i < k; i++) {
                msgs.add(new Message(topic, bodies[Math.floorMod(from + i, bodies.length)]));
            }
            r = p.send(msgs);
        }
        return r != null && r.getSendStatus() == SendStatus.SEND_OK;
    }

    private static double pct(long[] sorted, double q) {
        if (sorted.length == 0) {
            return 0.0;
        }
        int i = (int) Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1));
        return sorted[i] / 1e3;
    }

    private static String consumed(String mode, long msgs, double seconds) {
        return String.format(Locale.ROOT, "{\"mode\": \"%s\", \"msgs\": %d, \"failed\": 0, \"seconds\": %.6f, \"msg_s\": %.1f}",
                mode, msgs, seconds, seconds > 0 ? msgs / seconds : 0.0);
    }

    private static String push(Args a) throws Exception {
        int total = a.num("messages", 100_000);
        long limitMs = TimeUnit.SECONDS.toMillis(a.num("seconds", 60));
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(unique("bench_push"));
        c.setNamesrvAddr(a.str("namesrv", null));
        c.setInstanceName(unique("c"));
        c.subscribe(a.str("topic", null), "*");
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPullBatchSize(a.num("pull-batch", 32));
        c.setConsumeMessageBatchMaxSize(a.num("pull-batch", 32));
        AtomicLong got = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        long[] lastAt = new long[1];
        long[] firstAt = new long[1];
        c.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            synchronized (firstAt) { // the clock starts at the first message: not the client's start-up
                if (firstAt[0] == 0) {
                    System.out.println("START");
                    System.out.flush();
                    firstAt[0] = System.nanoTime();
                }
            }
            if (got.addAndGet(msgs.size()) >= total) {
                synchronized (lastAt) {
                    if (lastAt[0] == 0) {
                        lastAt[0] = System.nanoTime();
                    }
                }
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        done.await(limitMs, TimeUnit.MILLISECONDS);
        long end;
        synchronized (lastAt) {
            end = lastAt[0] != 0 ? lastAt[0] : System.nanoTime();
        }
        long t0;
        synchronized (firstAt) {
            t0 = firstAt[0] != 0 ? firstAt[0] : end;
        }
        String out = consumed("push", got.get(), (end - t0) / 1e9);
        c.shutdown();
        return out;
    }

    private static String pull(Args a) throws Exception {
        int total = a.num("messages", 100_000);
        long limitNs = TimeUnit.SECONDS.toNanos(a.num("seconds", 60));
        int batch = a.num("pull-batch", 32);
        String topic = a.str("topic", null);
        DefaultMQPullConsumer c = new DefaultMQPullConsumer(unique("bench_pull"));
        c.setNamesrvAddr(a.str("namesrv", null));
        c.setInstanceName(unique("c"));
        c.start();
        Set<MessageQueue> queues = c.fetchSubscribeMessageQueues(topic);
        AtomicLong got = new AtomicLong();
        System.out.println("START");
        System.out.flush();
        long t0 = System.nanoTime();
        long deadline = t0 + limitNs;
        List<Thread> workers = new ArrayList<>();
        for (MessageQueue mq : queues) {
            Thread w = new Thread(() -> {
                long offset = 0;
                while (got.get() < total && System.nanoTime() < deadline) {
                    PullResult r;
                    try {
                        r = c.pull(mq, "*", offset, batch, 10_000);
                    } catch (Exception e) {
                        return;
                    }
                    if (r.getPullStatus() != PullStatus.FOUND) {
                        return; // the queue's end (NO_NEW_MSG) or an offset the broker refused
                    }
                    got.addAndGet(r.getMsgFoundList().size());
                    offset = r.getNextBeginOffset();
                }
            }, "bench-pull-" + mq.getQueueId());
            w.start();
            workers.add(w);
        }
        for (Thread w : workers) {
            w.join(Math.max(1, TimeUnit.NANOSECONDS.toMillis(deadline - System.nanoTime()) + 30_000));
        }
        double seconds = (System.nanoTime() - t0) / 1e9;
        String out = consumed("pull", got.get(), seconds);
        c.shutdown();
        return out;
    }
}
