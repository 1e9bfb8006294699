package mqtool.realmq;

import java.io.BufferedReader;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.lang.reflect.Field;
import java.lang.reflect.Modifier;
import java.nio.charset.StandardCharsets;
import java.util.List;
import org.apache.rocketmq.tools.command.MQAdminStartup;

/**
 * mqadmin commands one after another in one JVM: each line read from stdin is one command's
 * arguments, separated by tabs, exactly as {@code mqadmin} takes them; each is run by the tools'
 * own {@code MQAdminStartup.main0}, and what it printed is written to stdout as a line
 * {@code @@mqadmin-done@@ OUT_BYTES ERR_BYTES} followed by those bytes (stdout, then stderr).
 * The admin tool's code runs as it does from {@code mqadmin}, with new sub-command objects for
 * each command; only the JVM start is saved.
 */
public final class AdminShell {
    private AdminShell() {
    }

    /**
     * Empty MQAdminStartup's static list of sub-command objects, so main0 makes new ones, as in
     * a new process (a sub-command keeps its admin client in a field, shut down after use).
     */
    private static void forgetCommands() throws ReflectiveOperationException {
        for (Field f : MQAdminStartup.class.getDeclaredFields()) {
            if (Modifier.isStatic(f.getModifiers()) && List.class.isAssignableFrom(f.getType())) {
                f.setAccessible(true);
                ((List<?>) f.get(null)).clear();
            }
        }
    }

    public static void main(String[] argv) throws Exception {
        PrintStream out = System.out;
        PrintStream err = System.err;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] args = line.isEmpty() ? new String[0] : line.split("\t", -1);
            ByteArrayOutputStream said = new ByteArrayOutputStream();
            ByteArrayOutputStream complained = new ByteArrayOutputStream();
            System.setOut(new PrintStream(said, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(complained, true, StandardCharsets.UTF_8));
            try {
                forgetCommands();
                MQAdminStartup.main0(args, null);
            } catch (Throwable t) {
                t.printStackTrace();
            } finally {
                System.out.flush();
                System.err.flush();
                System.setOut(out);
                System.setErr(err);
            }
            byte[] o = said.toByteArray();
            byte[] e = complained.toByteArray();
            out.write(("\n@@mqadmin-done@@ " + o.length + " " + e.length + "\n")
                .getBytes(StandardCharsets.UTF_8));
            out.write(o);
            out.write(e);
            out.flush();
        }
    }
}
