// Prints every option of every command mqadmin 4.9.8 registers, one per line:
// <command> <short> <long> <hasArg> <required> <description>, read from each SubCommand's
// buildCommandlineOptions (run as a single-file program: java -cp <mqadmin classpath> MqadminOptions.java).
import java.lang.reflect.Field;
import java.util.List;
import org.apache.commons.cli.Option;
import org.apache.commons.cli.Options;
import org.apache.rocketmq.tools.command.MQAdminStartup;
import org.apache.rocketmq.tools.command.SubCommand;

public class MqadminOptions {
    public static void main(String[] args) throws Exception {
        MQAdminStartup.initCommand();
        Field f = MQAdminStartup.class.getDeclaredField("subCommandList");
        f.setAccessible(true);
        @SuppressWarnings("unchecked")
        List<SubCommand> commands = (List<SubCommand>) f.get(null);
        for (SubCommand c : commands) {
            Options options = c.buildCommandlineOptions(new Options());
            for (Object each : options.getOptions()) {
                Option o = (Option) each;
                boolean grouped = options.getOptionGroup(o) != null;
                System.out.printf("%s\t%s\t%s\t%s\t%s\t%s%n", c.commandName(), o.getOpt(), o.getLongOpt(),
                    o.hasArg(), o.isRequired() || (grouped && options.getOptionGroup(o).isRequired()),
                    o.getDescription());
            }
        }
    }
}
