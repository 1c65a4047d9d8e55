package pumice.interop;

import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * mqadmin 4.9.8 (MQAdminStartup, unchanged) that ends its JVM once the command has returned.
 *
 * <pre>java -cp pumice-interop.jar:CLASSPATH pumice.interop.MQAdminExit COMMAND ARGS...</pre>
 *
 * A command shuts its admin client down before it returns (requests answered, the client
 * unregistered, its channels closed); the JVM then idles about 3 s more until Netty's event
 * loops pass their quiet period. The tests run some 150 such commands: this ends the JVM at
 * once, with the exit status the JVM would have had (0; a bad command line still exits in
 * MQAdminStartup, and an exception thrown out of it still ends the JVM as before). Commands
 * that keep running after main returns (startMonitoring) are run with MQAdminStartup itself.
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
