// The PostgreSQL JDBC driver through pgcrew (see test/drivers/README.md):
// prepareThreshold=1 (server-prepared from the first use), executeBatch,
// CopyManager, a large result read with a fetch size, Statement.cancel,
// each result checked. usage: JdbcCheck JDBC_URL USER PASSWORD TABLE
package pgcrew;

import java.io.ByteArrayOutputStream;
import java.io.StringReader;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import org.postgresql.PGConnection;
import org.postgresql.copy.CopyManager;

public final class JdbcCheck {
    private static void check(boolean cond, String what) {
        if (!cond) {
            System.err.println("jdbc check failed: " + what);
            System.exit(1);
        }
    }

    private static String state(SQLException e) {
        return e.getSQLState() == null ? "" : e.getSQLState();
    }

    private static long count(Connection c, String sql) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getLong(1);
        }
    }

    public static void main(String[] args) throws Exception {
        int reuse = Integer.parseInt(System.getenv().getOrDefault("REUSE", "3000"));
        String tbl = "\"" + args[3] + "\"";
        String ins = "INSERT INTO " + tbl + " VALUES (?, ?)";
        StringBuilder out = new StringBuilder("{\"driver\": \"jdbc\"");
        Connection c = DriverManager.getConnection(args[0], args[1], args[2]);
        c.setAutoCommit(true);

        try (PreparedStatement ps = c.prepareStatement("SELECT ?::int + ?::int, ?::text || '!', ?::text IS NULL")) {
            ps.setInt(1, 40);
            ps.setInt(2, 2);
            ps.setString(3, "hi");
            ps.setNull(4, java.sql.Types.VARCHAR);
            try (ResultSet rs = ps.executeQuery()) {
                check(rs.next() && rs.getInt(1) == 42 && rs.getString(2).equals("hi!") && rs.getBoolean(3), "parameters");
            }
        }

        Set<Integer> pids = new HashSet<>();
        try (PreparedStatement ps = c.prepareStatement("SELECT ?::int * 2, pg_backend_pid()")) {
            for (int i = 0; i < reuse; i++) {
                ps.setInt(1, i);
                try (ResultSet rs = ps.executeQuery()) {
                    check(rs.next() && rs.getInt(1) == 2 * i, "reuse " + i);
                    pids.add(rs.getInt(2));
                }
            }
        }
        out.append(", \"reused\": ").append(reuse).append(", \"backends\": ").append(pids.size());

        c.setAutoCommit(false);
        try (PreparedStatement ps = c.prepareStatement(ins)) {
            ps.setInt(1, 1);
            ps.setString(2, "a");
            ps.executeUpdate();
            c.rollback();
            ps.setString(2, "b");
            ps.executeUpdate();
            c.commit();
        }
        c.setAutoCommit(true);
        try (PreparedStatement ps = c.prepareStatement("SELECT t FROM " + tbl + " WHERE id = ?")) {
            ps.setInt(1, 1);
            try (ResultSet rs = ps.executeQuery()) {
                check(rs.next() && rs.getString(1).equals("b") && !rs.next(), "rollback then commit");
            }
        }

        try (PreparedStatement ps = c.prepareStatement("SELECT 1 / ?::int")) {
            ps.setInt(1, 0);
            ps.executeQuery();
            check(false, "division by zero raised nothing");
        } catch (SQLException e) {
            check(state(e).equals("22012"), "division by zero: " + e);
        }
        c.setAutoCommit(false);
        try (PreparedStatement ps = c.prepareStatement(ins)) {
            ps.setInt(1, 2);
            ps.setString(2, "c");
            ps.executeUpdate();
            ps.setInt(1, 1);
            ps.executeUpdate();
            check(false, "duplicate key raised nothing");
        } catch (SQLException e) {
            check(state(e).equals("23505"), "duplicate key: " + e);
            c.rollback();
        }
        c.setAutoCommit(true);
        check(count(c, "SELECT count(*) FROM " + tbl) == 1, "after errors");

        CopyManager cm = c.unwrap(PGConnection.class).getCopyAPI();
        StringBuilder data = new StringBuilder();
        for (int i = 1000; i < 2000; i++) {
            data.append(i).append("\trow ").append(i).append('\n');
        }
        long copied = cm.copyIn("COPY " + tbl + " (id, t) FROM STDIN", new StringReader(data.toString()));
        check(copied == 1000, "copy in " + copied);
        ByteArrayOutputStream bo = new ByteArrayOutputStream();
        cm.copyOut("COPY (SELECT id, t FROM " + tbl + " WHERE id >= 1000 ORDER BY id) TO STDOUT", bo);
        check(bo.toString(StandardCharsets.UTF_8).equals(data.toString()), "copy out");
        out.append(", \"copy_rows\": 1000");

        long t0 = System.nanoTime();
        long n = 0, total = 0, size = 0;
        c.setAutoCommit(false);   // a fetch size streams only inside a transaction
        try (PreparedStatement ps = c.prepareStatement("SELECT i, repeat('x', 500) FROM generate_series(1, ?) i")) {
            ps.setInt(1, 100000);
            ps.setFetchSize(5000);
            try (ResultSet rs = ps.executeQuery()) {
                while (rs.next()) {
                    n++;
                    total += rs.getInt(1);
                    size += rs.getString(2).length();
                }
            }
        }
        c.commit();
        c.setAutoCommit(true);
        check(n == 100000 && total == 5000050000L && size == 50000000L, "large " + n + " " + total + " " + size);
        out.append(", \"large_rows\": ").append(n)
           .append(", \"large_seconds\": ").append((System.nanoTime() - t0) / 1e9);

        ScheduledExecutorService ex = Executors.newSingleThreadScheduledExecutor();
        try (Statement s = c.createStatement()) {
            ex.schedule(() -> { try { s.cancel(); } catch (SQLException e) { } }, 500, TimeUnit.MILLISECONDS);
            t0 = System.nanoTime();
            s.execute("SELECT pg_sleep(30)");
            check(false, "pg_sleep was not cancelled");
        } catch (SQLException e) {
            check(state(e).equals("57014"), "cancel: " + e);
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        ex.shutdown();
        check(secs < 10, "cancel took " + secs);
        out.append(", \"cancel_seconds\": ").append(secs);
        check(count(c, "SELECT 7") == 7, "after cancel");

        try (PreparedStatement ps = c.prepareStatement(ins)) {
            for (int i = 3000; i < 3500; i++) {
                ps.setInt(1, i);
                ps.setString(2, "p");
                ps.addBatch();
            }
            int[] res = ps.executeBatch();
            check(res.length == 500, "batch");
        }
        check(count(c, "SELECT count(*) FROM " + tbl + " WHERE t = 'p'") == 500, "batch rows");
        out.append(", \"pipelined\": 500}");
        c.close();
        System.out.println(out);
    }
}
