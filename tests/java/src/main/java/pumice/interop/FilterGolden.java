package pumice.interop;

import java.io.File;
import java.nio.file.Files;
import java.util.Arrays;
import org.apache.rocketmq.broker.filter.ConsumerFilterData;
import org.apache.rocketmq.broker.filter.ConsumerFilterManager;
import org.apache.rocketmq.filter.util.BitsArray;
import org.apache.rocketmq.filter.util.BloomFilter;
import org.apache.rocketmq.filter.util.BloomFilterData;
import org.apache.rocketmq.store.ConsumeQueueExt;

/** Golden facts from RocketMQ's own BloomFilter, ConsumeQueueExt and ConsumerFilterManager. */
final class FilterGolden {
    private FilterGolden() {
    }

    static void run(Driver.Args a) throws Exception {
        // keep the store's and filter's INFO logs (logback's default: console) off stdout
        ((ch.qos.logback.classic.Logger) org.slf4j.LoggerFactory.getLogger(org.slf4j.Logger.ROOT_LOGGER_NAME))
            .setLevel(ch.qos.logback.classic.Level.WARN);
        File dir = new File(a.get("dir", "filter-golden"));
        dir.mkdirs();
        // bloom filter parameters
        int[][] fn = {{20, 32}, {20, 64}, {10, 128}, {1, 1}, {99, 1000}, {5, 16}};
        for (int[] p : fn) {
            BloomFilter b = BloomFilter.createByFn(p[0], p[1]);
            Driver.emit("bloom", "f", p[0], "n", p[1], "k", b.getK(), "m", b.getM());
        }
        // bit positions
        String[] strs = {"CID_SQL#TopicA", "G#T", "", "\u7ec4#\u4e3b\u9898",
            "a-very-long-consumer-group-name-with-many-characters#SomeTopicName_0123456789", "\uD83D\uDE00#emoji"};
        for (int[] p : new int[][] {{20, 32}, {10, 128}}) {
            BloomFilter b = BloomFilter.createByFn(p[0], p[1]);
            for (String s : strs) {
                Driver.emit("positions", "f", p[0], "n", p[1], "str", s, "pos", b.calcBitPositions(s));
            }
        }
        // bitmaps, by string and by BloomFilterData
        BloomFilter bf = BloomFilter.createByFn(20, 32);
        BitsArray bits = BitsArray.create(bf.getM());
        bf.hashTo("CID_A#T", bits);
        bf.hashTo("CID_B#T", bits);
        Driver.emit("bitmap", "via", "str", "strs", new String[] {"CID_A#T", "CID_B#T"}, "hex", hex(bits.bytes()),
            "hitA", bf.isHit("CID_A#T", bits), "hitC", bf.isHit("CID_C#T", bits));
        BitsArray bits2 = BitsArray.create(bf.getM());
        BloomFilterData da = bf.generate("CID_A#T");
        bf.hashTo(da, bits2);
        bf.hashTo(bf.generate("CID_B#T"), bits2);
        Driver.emit("bitmap", "via", "data", "strs", new String[] {"CID_A#T", "CID_B#T"}, "hex", hex(bits2.bytes()),
            "hitA", bf.isHit(da, bits2), "hitC", bf.isHit(bf.generate("CID_C#T"), bits2));
        // consume queue ext
        String store = new File(dir, "cqext").getPath();
        ConsumeQueueExt ext = new ConsumeQueueExt("TopicA", 0, store, 128, 112);
        byte[] inc = new byte[14];
        for (int i = 0; i < 14; i++) {
            inc[i] = (byte) (i + 1);
        }
        Object[][] units = {{0L, null}, {-1234567L, inc}, {Long.MAX_VALUE, fill(0xff)}, {42L, fill(0)},
            {7L, null}, {8L, fill(0xa5)}, {9L, null}, {10L, fill(0x5a)}};
        long[] addrs = new long[units.length];
        for (int i = 0; i < units.length; i++) {
            long tags = (Long) units[i][0];
            byte[] bm = (byte[]) units[i][1];
            addrs[i] = ext.put(new ConsumeQueueExt.CqExtUnit(tags, 1700000000000L + i, bm));
            Driver.emit("ext_put", "tagsCode", tags, "msgStoreTime", 1700000000000L + i, "bitmap", hex(bm), "addr", addrs[i]);
        }
        ext.flush(0);
        Driver.emit("ext_bounds", "min", ext.getMinAddress(), "max", ext.getMaxAddress());
        File[] files = new File(store, "TopicA/0").listFiles();
        Arrays.sort(files);
        for (File f : files) {
            Driver.emit("ext_file", "name", f.getName(), "hex", hex(Files.readAllBytes(f.toPath())));
        }
        for (long addr : addrs) {
            ConsumeQueueExt.CqExtUnit u = ext.get(addr);
            Driver.emit("ext_get", "addr", addr, "tagsCode", u.getTagsCode(), "msgStoreTime", u.getMsgStoreTime(),
                "bitmap", hex(u.getFilterBitMap()), "size", u.getSize());
        }
        for (long v : new long[] {0, 1, -1, Integer.MIN_VALUE, (long) Integer.MIN_VALUE - 1, Long.MIN_VALUE, Long.MIN_VALUE + 5}) {
            Driver.emit("ext_addr", "v", v, "isExt", ConsumeQueueExt.isExtAddr(v), "unDecorate", ext.unDecorate(v),
                "decorate", ext.decorate(v));
        }
        // consumer filter manager
        ConsumerFilterManager m = new ConsumerFilterManager();
        Object[][] regs = {{"TopicA", "CID_1", "a > 1", "SQL92", 1L}, {"TopicA", "CID_2", "b = 'x' AND c IS NOT NULL", "SQL92", 2L},
            {"TopicB", "CID_1", "TAGS IN ('a','b')", "SQL92", 3L}, {"TopicB", "CID_3", "*", "TAG", 4L},
            {"TopicA", "CID_1", "a > 1", "SQL92", 1L}};
        for (Object[] r : regs) {
            boolean ret = m.register((String) r[0], (String) r[1], (String) r[2], (String) r[3], (Long) r[4]);
            Driver.emit("register", "topic", r[0], "group", r[1], "ret", ret);
        }
        m.unRegister("CID_2");
        String compact = m.encode(false);
        Driver.emit("filter_json", "compact", compact);
        Driver.emit("filter_json_pretty", "pretty", m.encode(true));
        ConsumerFilterManager reloaded = new ConsumerFilterManager();
        reloaded.decode(compact);
        Driver.emit("filter_json_reloaded", "compact", reloaded.encode(false));
        for (int i = 0; i < 4; i++) {
            ConsumerFilterData d = m.get((String) regs[i][0], (String) regs[i][1]);
            if (d != null) {
                Driver.emit("filter_data", "topic", d.getTopic(), "group", d.getConsumerGroup(), "bornTime", d.getBornTime(),
                    "deadTime", d.getDeadTime(), "clientVersion", d.getClientVersion(), "dead", d.isDead(),
                    "bitPos", d.getBloomFilterData().getBitPos(), "bitNum", d.getBloomFilterData().getBitNum());
            }
        }
        Driver.emit("done");
    }

    static byte[] fill(int b) {
        byte[] x = new byte[14];
        Arrays.fill(x, (byte) b);
        return x;
    }

    static String hex(byte[] b) {
        if (b == null) {
            return null;
        }
        StringBuilder s = new StringBuilder();
        for (byte x : b) {
            s.append(String.format("%02x", x));
        }
        return s.toString();
    }
}
