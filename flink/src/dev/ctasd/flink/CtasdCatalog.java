package dev.ctasd.flink;

import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.table.api.Schema;
import org.apache.flink.table.catalog.CatalogBaseTable;
import org.apache.flink.table.catalog.CatalogDatabase;
import org.apache.flink.table.catalog.CatalogDatabaseImpl;
import org.apache.flink.table.catalog.CatalogTable;
import org.apache.flink.table.catalog.GenericInMemoryCatalog;
import org.apache.flink.table.catalog.ObjectPath;
import org.apache.flink.table.catalog.ResolvedCatalogTable;
import org.apache.flink.table.catalog.exceptions.CatalogException;
import org.apache.flink.table.catalog.exceptions.DatabaseNotExistException;
import org.apache.flink.table.catalog.exceptions.TableAlreadyExistException;
import org.apache.flink.table.catalog.exceptions.TableNotExistException;
import org.apache.flink.table.factories.Factory;
import org.apache.flink.table.types.DataType;
import org.apache.flink.table.types.logical.utils.LogicalTypeParser;
import org.apache.flink.table.types.utils.TypeConversions;
import org.apache.flink.table.api.DataTypes;

/**
 * A catalog of ctasd: databases, tables and columns are read from ctasd's
 * browse API each time (no copy to go stale), and tables are made through
 * ctasd's jobs, by {@code CREATE TABLE … AS SELECT} with the sink this
 * catalog's factory makes. Functions, partitions and statistics are this
 * session's only (the in-memory catalog's).
 */
final class CtasdCatalog extends GenericInMemoryCatalog {
    private final Remote remote;
    /** The password of the catalog's database (jdbc), for the rows a CTAS writes; or null. */
    private final String password;

    CtasdCatalog(String name, String defaultDatabase, Remote remote, String password) {
        super(name, defaultDatabase == null ? defaultDatabaseOf(remote) : defaultDatabase);
        this.remote = remote;
        this.password = password;
    }

    /** ctasd's default database of the catalog, asked once at CREATE CATALOG. */
    private static String defaultDatabaseOf(Remote remote) {
        for (JsonNode database : databases(remote)) {
            if (database.path("default").asBoolean(false)) {
                return database.path("name").asText();
            }
        }
        return "default";
    }

    private static JsonNode databases(Remote remote) {
        CtasdClient.Answer answer = ask(() -> remote.client.get(remote.catalogPath() + "/databases"), remote);
        if (!answer.ok()) {
            throw new CatalogException("ctasd at " + remote.client.url() + " refused to list the databases of catalog '"
                    + remote.catalog + "': " + answer.problem());
        }
        return answer.body.path("databases");
    }

    interface Call {
        CtasdClient.Answer call() throws IOException;
    }

    static CtasdClient.Answer ask(Call call, Remote remote) {
        try {
            return call.call();
        } catch (IOException e) {
            throw new CatalogException("ctasd at " + remote.client.url() + " cannot be reached: " + e.getMessage(), e);
        }
    }

    @Override
    public Optional<Factory> getFactory() {
        return Optional.of(new CtasdTableFactory(remote, password));
    }

    @Override
    public List<String> listDatabases() {
        List<String> names = new ArrayList<>();
        for (JsonNode database : databases(remote)) {
            names.add(database.path("name").asText());
        }
        return names;
    }

    @Override
    public boolean databaseExists(String database) {
        return listDatabases().contains(database);
    }

    @Override
    public CatalogDatabase getDatabase(String database) throws DatabaseNotExistException {
        if (!databaseExists(database)) {
            throw new DatabaseNotExistException(getName(), database);
        }
        return new CatalogDatabaseImpl(new HashMap<>(), null);
    }

    @Override
    public List<String> listTables(String database) throws DatabaseNotExistException {
        String path = remote.catalogPath() + "/databases/" + CtasdClient.segment(database) + "/tables";
        CtasdClient.Answer answer = ask(() -> remote.client.get(path), remote);
        if (answer.status == 404) {
            throw new DatabaseNotExistException(getName(), database);
        }
        if (!answer.ok()) {
            throw new CatalogException("ctasd refused to list tables of '" + database + "': " + answer.problem());
        }
        List<String> names = new ArrayList<>();
        for (JsonNode table : answer.body.path("tables")) {
            names.add(table.path("name").asText());
        }
        return names;
    }

    @Override
    public List<String> listViews(String database) {
        return new ArrayList<>();
    }

    @Override
    public boolean tableExists(ObjectPath path) {
        CtasdClient.Answer answer = table(path);
        if (answer.status == 404) {
            return false;
        }
        if (!answer.ok()) {
            throw new CatalogException("ctasd refused to look up " + path.getFullName() + ": " + answer.problem());
        }
        return true;
    }

    @Override
    public CatalogBaseTable getTable(ObjectPath path) throws TableNotExistException {
        CtasdClient.Answer answer = table(path);
        if (answer.status == 404) {
            throw new TableNotExistException(getName(), path);
        }
        if (!answer.ok()) {
            throw new CatalogException("ctasd refused to read " + path.getFullName() + ": " + answer.problem());
        }
        Schema.Builder schema = Schema.newBuilder();
        for (JsonNode column : answer.body.path("columns")) {
            schema.column(column.path("name").asText(), flinkType(column));
        }
        Map<String, String> options = new HashMap<>();
        answer.body.path("options").properties().forEach(e -> options.put(e.getKey(), e.getValue().asText()));
        return CatalogTable.newBuilder().schema(schema.build()).options(options).build();
    }

    private CtasdClient.Answer table(ObjectPath path) {
        return ask(() -> remote.client.get(remote.tablePath(path.getDatabaseName(), path.getObjectName())), remote);
    }

    /** A column's type as Flink reads it; a system's own type Flink does not know reads as STRING. */
    private static DataType flinkType(JsonNode column) {
        DataType type;
        try {
            type = TypeConversions.fromLogicalToDataType(
                    LogicalTypeParser.parse(column.path("data_type").asText(), CtasdCatalog.class.getClassLoader()));
        } catch (RuntimeException notFlinks) {
            type = DataTypes.STRING();
        }
        return column.path("nullable").asBoolean(true) ? type.nullable() : type.notNull();
    }

    /**
     * Plain {@code CREATE TABLE}: a ctasd job in streaming mode with one
     * hook, reported CREATED (ctasd creates the table, as for a streaming
     * CTAS, through its ledger) and FINISHED (a streaming table stays).
     */
    @Override
    public void createTable(ObjectPath path, CatalogBaseTable table, boolean ignoreIfExists)
            throws TableAlreadyExistException {
        if (!(table instanceof ResolvedCatalogTable)) {
            throw new CatalogException("a ctasd catalog holds tables, not views: " + path.getFullName());
        }
        Map<String, Object> hook = Staging.hook("create_table_as", ignoreIfExists, remote.catalog,
                path.getDatabaseName(), path.getObjectName(), (ResolvedCatalogTable) table);
        Map<String, Object> job = Staging.job("Flink CREATE TABLE " + path.getFullName(), "streaming", null, hook);
        CtasdClient.Answer created = ask(() -> remote.client.post("/v1/jobs", job), remote);
        if (created.status == 409 && "TABLE_EXISTS".equals(created.body.path("code").asText())) {
            throw new TableAlreadyExistException(getName(), path);
        }
        if (!created.ok()) {
            throw new CatalogException("ctasd refused to create " + path.getFullName() + ": " + created.problem());
        }
        String id = "/v1/jobs/" + CtasdClient.segment(created.body.path("id").asText()) + "/status";
        for (String status : new String[] {"CREATED", "FINISHED"}) {
            Map<String, Object> report = new HashMap<>();
            report.put("status", status);
            CtasdClient.Answer moved = ask(() -> remote.client.put(id, report), remote);
            if (!moved.ok()) {
                throw new CatalogException("ctasd could not create " + path.getFullName() + ": " + moved.problem());
            }
            for (JsonNode failure : moved.body.path("job").path("failures")) {
                throw new CatalogException("ctasd could not create " + path.getFullName() + ": "
                        + failure.path("error").asText());
            }
        }
    }

    /** DROP TABLE through ctasd, which drops only a table it can prove it published. */
    @Override
    public void dropTable(ObjectPath path, boolean ignoreIfNotExists) throws TableNotExistException {
        String table = remote.tablePath(path.getDatabaseName(), path.getObjectName());
        CtasdClient.Answer dropped = ask(() -> remote.client.delete(table), remote);
        if (dropped.status == 404) {
            if (ignoreIfNotExists) {
                return;
            }
            throw new TableNotExistException(getName(), path);
        }
        if (!dropped.ok()) {
            throw new CatalogException("ctasd refused to drop " + path.getFullName() + ": " + dropped.problem());
        }
    }
}
