package pumice.interop;

import com.alibaba.fastjson.JSON;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * Small programs over the official RocketMQ 4.9.8 client, run by tests/interop as processes.
 *
 * <pre>java -cp pumice-interop.jar:CLASSPATH pumice.interop.Driver SUBCOMMAND --name value ...</pre>
 *
 * Subcommands: produce, push, litepull, pull, query, transact, request, responder. Each prints JSON lines to stdout, one per
 * event ("sent", "received", ...), and {"event":"done"} or {"event":"stopped"} last. A
 * long-running one (push, litepull) stops on "stop" or end of input on stdin, or when it has
 * received --count messages, or after --duration seconds.
 */
public final class Driver {
    private static final Object OUT = new Object();

    public static void main(String[] argv) throws Exception {
        if (argv.length == 0) {
            System.err.println("usage: Driver produce|push|litepull|pull|query --name value ...");
            System.exit(2);
        }
        Args args = new Args(argv);
        try {
            switch (argv[0]) {
                case "produce" -> Produce.run(args);
                case "push" -> Push.run(args);
                case "litepull" -> LitePull.run(args);
                case "pull" -> Pull.run(args);
                case "query" -> Query.run(args);
                case "transact" -> Transact.run(args);
                case "request" -> RequestReply.request(args);
                case "responder" -> RequestReply.respond(args);
                case "filter-golden" -> FilterGolden.run(args);
                default -> {
                    System.err.println("unknown subcommand " + argv[0]);
                    System.exit(2);
                }
            }
        } catch (Throwable e) { // the client's non-daemon threads would keep a failed run up
            e.printStackTrace();
            System.exit(1);
        }
        System.exit(0); // the client's non-daemon threads must not keep the JVM up
    }

    /** One JSON line: "event" first, then the pairs given. */
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

    /** A received message, everything the tests compare. */
    static Object[] describe(MessageExt m) {
        return new Object[] {
            "topic", m.getTopic(), "msgId", m.getMsgId(), "offsetMsgId", offsetMsgId(m),
            "queueId", m.getQueueId(), "queueOffset", m.getQueueOffset(), "brokerName", m.getBrokerName(),
            "keys", m.getKeys(), "tags", m.getTags(), "props", m.getProperties(),
            "bodyLen", m.getBody().length, "bodySha256", sha256(m.getBody()),
            "bodyText", m.getBody().length <= 2048 ? new String(m.getBody(), StandardCharsets.UTF_8) : null,
            "reconsumeTimes", m.getReconsumeTimes(), "bornTimestamp", m.getBornTimestamp(),
            "storeTimestamp", m.getStoreTimestamp(), "sysFlag", m.getSysFlag(), "commitLogOffset", m.getCommitLogOffset(),
            "receivedAt", System.currentTimeMillis(), "thread", Thread.currentThread().getName(),
        };
    }

    static String offsetMsgId(MessageExt m) {
        return m instanceof MessageClientExt c ? c.getOffsetMsgId() : m.getMsgId();
    }

    /**
     * Body i of a run: "LABEL-i|" then the bytes 0..255 repeated, cut to size (size 0: just
     * "LABEL-i"). tests/helpers/java_driver.py builds the same bytes.
     */
    static byte[] body(String label, int i, int size) {
        byte[] head = (label + "-" + i + (size > 0 ? "|" : "")).getBytes(StandardCharsets.UTF_8);
        if (size <= 0) {
            return head;
        }
        byte[] b = new byte[size];
        for (int k = 0; k < size; k++) {
            b[k] = k < head.length ? head[k] : (byte) ((k - head.length) & 0xff);
        }
        return b;
    }

    static String sha256(byte[] b) {
        try {
            StringBuilder s = new StringBuilder();
            for (byte x : MessageDigest.getInstance("SHA-256").digest(b)) {
                s.append(String.format("%02x", x));
            }
            return s.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    /** The options every client shares. */
    /** --access-key K --secret-key S: the official ACL signer (AclClientRPCHook), else none. */
    static RPCHook rpcHook(Args a) {
        if (!a.has("access-key")) {
            return null;
        }
        return new AclClientRPCHook(new SessionCredentials(a.get("access-key", null), a.get("secret-key", null)));
    }

    static void configure(ClientConfig c, Args a) {
        c.setNamesrvAddr(a.get("namesrv", "127.0.0.1:9876"));
        if (a.has("instance")) {
            c.setInstanceName(a.get("instance", null));
        }
        if (a.has("vip")) {
            c.setVipChannelEnabled(a.bool("vip"));
        }
        if (a.has("tls")) { // as -Dtls.enable=true: every connection TLS, any server certificate trusted
            c.setUseTLS(a.bool("tls"));
        }
        // find a new topic's route within a second (--poll-ms 30000, 4.9's default, keeps a dead
        // broker's route for up to 30 s)
        c.setPollNameServerInterval(a.integer("poll-ms", 1000));
        c.setHeartbeatBrokerInterval(a.integer("heartbeat-ms", 30_000));
    }

    /** A latch that opens on "stop" or end of stdin, on reaching a count, or after a deadline. */
    static final class Stopper {
        final CountDownLatch latch = new CountDownLatch(1);

        Stopper(double durationSeconds) {
            Thread t = new Thread(() -> {
                try (BufferedReader r = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8))) {
                    String line;
                    while ((line = r.readLine()) != null && !line.trim().equals("stop")) {
                        // wait for "stop"
                    }
                } catch (Exception ignored) {
                    // end of input
                }
                latch.countDown();
            }, "stdin-stopper");
            t.setDaemon(true);
            t.start();
            Thread timer = new Thread(() -> {
                try {
                    Thread.sleep((long) (durationSeconds * 1000));
                } catch (InterruptedException ignored) {
                    return;
                }
                emit("timeout", "seconds", durationSeconds);
                latch.countDown();
            }, "duration-stopper");
            timer.setDaemon(true);
            timer.start();
        }

        void stop() {
            latch.countDown();
        }

        void await() throws InterruptedException {
            latch.await();
        }

        boolean stopped() {
            return latch.getCount() == 0;
        }
    }

    /** --name value pairs; a name given several times keeps all its values. */
    static final class Args {
        private final Map<String, List<String>> values = new HashMap<>();

        Args(String[] argv) {
            for (int i = 1; i < argv.length; i++) {
                if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                    throw new IllegalArgumentException("expected --name value at " + argv[i]);
                }
                values.computeIfAbsent(argv[i].substring(2), k -> new ArrayList<>()).add(argv[++i]);
            }
        }

        boolean has(String name) {
            return values.containsKey(name);
        }

        String get(String name, String dflt) {
            List<String> v = values.get(name);
            return v == null ? dflt : v.get(v.size() - 1);
        }

        List<String> all(String name) {
            return values.getOrDefault(name, List.of());
        }

        int integer(String name, int dflt) {
            return has(name) ? Integer.parseInt(get(name, null)) : dflt;
        }

        double number(String name, double dflt) {
            return has(name) ? Double.parseDouble(get(name, null)) : dflt;
        }

        boolean bool(String name) {
            return Boolean.parseBoolean(get(name, "false"));
        }
    }
}
