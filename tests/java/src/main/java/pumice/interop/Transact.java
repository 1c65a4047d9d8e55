package pumice.interop;

import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * transact --topic T --count N --states commit,rollback,unknown [--check commit|rollback|unknown]
 * [--group G] [--label L] [--duration S]
 *
 * <p>A TransactionMQProducer: message i's local transaction answers states[i % len]; every check
 * the broker sends is answered --check (unknown by default) and printed ("checked", with the
 * message's "i", its transactionId and how many checks it has had). Prints one "sent" line per
 * message, then stays up answering checks until "stop", end of input, or --duration.
 */
final class Transact {
    static void run(Driver.Args a) throws Exception {
        String topic = a.get("topic", "TopicTest");
        int count = a.integer("count", 1);
        String[] states = a.get("states", "commit").split(",");
        LocalTransactionState check = state(a.get("check", "unknown"));
        ConcurrentHashMap<String, AtomicInteger> checks = new ConcurrentHashMap<>();
        TransactionMQProducer p = new TransactionMQProducer(a.get("group", "PumiceInteropTx"));
        Driver.configure(p, a);
        p.setTransactionListener(new TransactionListener() {
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return state(states[Integer.parseInt(msg.getUserProperty("i")) % states.length]);
            }

            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                int n = checks.computeIfAbsent(msg.getTransactionId(), k -> new AtomicInteger()).incrementAndGet();
                Driver.emit("checked", "i", Integer.parseInt(msg.getUserProperty("i")), "transactionId",
                    msg.getTransactionId(), "topic", msg.getTopic(), "queueId", msg.getQueueId(), "checks", n,
                    "answer", check.name(), "bodyText", new String(msg.getBody()));
                return check;
            }
        });
        p.start();
        Driver.emit("started", "clientId", p.buildMQClientId());
        for (int i = 0; i < count; i++) {
            Message m = Produce.message(a, topic, i);
            try {
                TransactionSendResult r = p.sendMessageInTransaction(m, null);
                Driver.emit("sent", "i", i, "status", r.getSendStatus().name(), "state",
                    r.getLocalTransactionState().name(), "msgId", r.getMsgId(), "transactionId", r.getTransactionId(),
                    "offsetMsgId", r.getOffsetMsgId(), "queueId", r.getMessageQueue().getQueueId(),
                    "queueOffset", r.getQueueOffset());
            } catch (Exception e) {
                Driver.emit("error", "i", i, "error", e.toString());
            }
        }
        Driver.emit("done", "count", count);
        Driver.Stopper stopper = new Driver.Stopper(a.number("duration", 30));
        stopper.await();
        p.shutdown();
        Driver.emit("stopped");
    }

    static LocalTransactionState state(String name) {
        return switch (name) {
            case "commit" -> LocalTransactionState.COMMIT_MESSAGE;
            case "rollback" -> LocalTransactionState.ROLLBACK_MESSAGE;
            default -> LocalTransactionState.UNKNOW;
        };
    }
}
