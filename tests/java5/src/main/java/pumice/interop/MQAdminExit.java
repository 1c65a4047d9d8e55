package pumice.interop;

import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * mqadmin 5.5.0 (MQAdminStartup, unchanged) that ends its JVM once the command has returned: the
 * same class as tests/java's for mqadmin 4.9.8, so that tests/helpers/mqadmin.py runs either
 * tools jar the same way (without it the JVM idles about 3 s in Netty's quiet period).
 */
public final class MQAdminExit {
    private MQAdminExit() {}

    public static void main(String[] args) {
        MQAdminStartup.main(args);
        System.out.flush();
        System.err.flush();
        System.exit(0);
    }
}
