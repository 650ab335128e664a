package dev.ctasd.flink;

import java.io.IOException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.SQLException;
import java.time.LocalDate;
import java.time.LocalTime;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.table.data.DecimalData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.types.logical.LogicalType;

/**
 * Rows into a staging table of a JDBC catalog (PostgreSQL, MySQL/MariaDB),
 * where Flink's JDBC connector is not at hand: each writer inserts its rows
 * in batches through the database's JDBC driver (in Flink's {@code lib/},
 * as the connector's would be). The staging is ctasd's; ctasd publishes it
 * at commit or drops it at abort.
 */
final class JdbcStagingSink implements Sink<RowData> {
    private static final long serialVersionUID = 1L;
    /** Rows sent to the database at once. */
    private static final int BATCH = 500;

    private final String url;
    private final String table;
    private final String username;
    private final String password;
    private final List<String> columns;
    private final List<LogicalType> types;

    JdbcStagingSink(String url, String table, String username, String password, List<String> columns,
            List<LogicalType> types) {
        this.url = url;
        this.table = table;
        this.username = username;
        this.password = password;
        this.columns = columns;
        this.types = types;
    }

    @Override
    public SinkWriter<RowData> createWriter(WriterInitContext context) throws IOException {
        return new Writer();
    }

    /** An identifier as the database quotes it. */
    private String quoted(String name) {
        if (url.startsWith("jdbc:mysql:") || url.startsWith("jdbc:mariadb:")) {
            return "`" + name.replace("`", "``") + "`";
        }
        return "\"" + name.replace("\"", "\"\"") + "\"";
    }

    private String insert() {
        List<String> names = new ArrayList<>();
        List<String> marks = new ArrayList<>();
        for (String column : columns) {
            names.add(quoted(column));
            marks.add("?");
        }
        return "INSERT INTO " + quoted(table) + " (" + String.join(", ", names) + ") VALUES ("
                + String.join(", ", marks) + ")";
    }

    private final class Writer implements SinkWriter<RowData> {
        private final Connection connection;
        private final PreparedStatement statement;
        private final RowData.FieldGetter[] fields;
        private int pending;

        Writer() throws IOException {
            Properties credentials = new Properties();
            if (username != null) {
                credentials.setProperty("user", username);
            }
            if (password != null) {
                credentials.setProperty("password", password);
            }
            try {
                connection = DriverManager.getConnection(url, credentials);
                connection.setAutoCommit(false);
                statement = connection.prepareStatement(insert());
            } catch (SQLException e) {
                throw new IOException("cannot write the staging table " + table + " at " + url + ": "
                        + e.getMessage(), e);
            }
            fields = new RowData.FieldGetter[types.size()];
            for (int i = 0; i < fields.length; i++) {
                fields[i] = RowData.createFieldGetter(types.get(i), i);
            }
        }

        @Override
        public void write(RowData row, Context context) throws IOException {
            try {
                for (int i = 0; i < fields.length; i++) {
                    statement.setObject(i + 1, jdbcValue(types.get(i), fields[i].getFieldOrNull(row)));
                }
                statement.addBatch();
                if (++pending >= BATCH) {
                    send();
                }
            } catch (SQLException e) {
                throw new IOException("cannot write to the staging table " + table + ": " + e.getMessage(), e);
            }
        }

        @Override
        public void flush(boolean endOfInput) throws IOException {
            try {
                send();
            } catch (SQLException e) {
                throw new IOException("cannot write to the staging table " + table + ": " + e.getMessage(), e);
            }
        }

        private void send() throws SQLException {
            if (pending > 0) {
                statement.executeBatch();
                connection.commit();
                pending = 0;
            }
        }

        @Override
        public void close() throws IOException {
            try {
                send();
            } catch (SQLException e) {
                throw new IOException("cannot write to the staging table " + table + ": " + e.getMessage(), e);
            } finally {
                try {
                    connection.close();
                } catch (SQLException ignored) {
                    // Closing after the last batch: nothing is lost.
                }
            }
        }
    }

    /** Flink's internal value as the JDBC driver takes it. */
    private static Object jdbcValue(LogicalType type, Object value) {
        if (value instanceof StringData) {
            return value.toString();
        }
        if (value instanceof DecimalData) {
            return ((DecimalData) value).toBigDecimal();
        }
        if (value instanceof TimestampData) {
            return ((TimestampData) value).toLocalDateTime();
        }
        if (value instanceof Integer) {
            // DATE and TIME are kept as an int: days, milliseconds of the day.
            switch (type.getTypeRoot()) {
                case DATE:
                    return LocalDate.ofEpochDay((Integer) value);
                case TIME_WITHOUT_TIME_ZONE:
                    return LocalTime.ofNanoOfDay((Integer) value * 1_000_000L);
                default:
                    return value;
            }
        }
        return value;
    }
}
