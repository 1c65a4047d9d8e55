package pumice.interop;

import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * query [--offset-msg-id ID ...] [--topic T --key K ...] [--topic T --uniq-key ID ...]
 *
 * <p>The client's MQAdmin queries (through a started producer): viewMessage by offset msgId
 * (VIEW_MESSAGE_BY_ID), queryMessage by key and viewMessage by unique key (QUERY_MESSAGE).
 * One "found" line per message (with "by" and "arg"), "error" lines, then "done".
 */
final class Query {
    static void run(Driver.Args a) throws Exception {
        DefaultMQProducer p = new DefaultMQProducer(a.get("namespace", null), a.get("group", "PumiceInteropQuery"));
        Driver.configure(p, a);
        p.start();
        String topic = a.get("topic", null);
        for (String id : a.all("offset-msg-id")) {
            try {
                found("offsetMsgId", id, p.viewMessage(id));
            } catch (Exception e) {
                Driver.emit("error", "by", "offsetMsgId", "arg", id, "error", e.toString());
            }
        }
        for (String key : a.all("key")) {
            try {
                QueryResult r = p.queryMessage(topic, key, a.integer("max", 32), 0, Long.MAX_VALUE);
                for (MessageExt m : r.getMessageList()) {
                    found("key", key, m);
                }
            } catch (Exception e) {
                Driver.emit("error", "by", "key", "arg", key, "error", e.toString());
            }
        }
        for (String id : a.all("uniq-key")) {
            try {
                found("uniqKey", id, p.viewMessage(topic, id));
            } catch (Exception e) {
                Driver.emit("error", "by", "uniqKey", "arg", id, "error", e.toString());
            }
        }
        p.shutdown();
        Driver.emit("done");
    }

    static void found(String by, String arg, MessageExt m) {
        Object[] d = Driver.describe(m);
        Object[] pairs = new Object[d.length + 4];
        pairs[0] = "by";
        pairs[1] = by;
        pairs[2] = "arg";
        pairs[3] = arg;
        System.arraycopy(d, 0, pairs, 4, d.length);
        Driver.emit("found", pairs);
    }
}
