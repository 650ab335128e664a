package dev.ctasd.flink;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

import org.apache.flink.table.catalog.Column;
import org.apache.flink.table.catalog.ResolvedCatalogTable;

/** A table Flink declares, as ctasd's job submission takes it. */
final class Staging {
    /**
     * Table options under this prefix are not the table's: {@code ctasd.audit.<n>.<field>} declare the
     * hook's audits in their property-map form, checked on the staging before it is published.
     */
    static final String AUDIT_OPTION_PREFIX = "ctasd.audit.";

    private Staging() {}

    /** One hook of `kind` onto catalog.database.table, with Flink's columns and options. */
    static Map<String, Object> hook(String kind, boolean ifNotExists, String catalog, String database, String table,
            ResolvedCatalogTable definition) {
        List<Map<String, String>> columns = new ArrayList<>();
        for (Column column : definition.getResolvedSchema().getColumns()) {
            if (column.isPhysical()) {
                Map<String, String> declared = new LinkedHashMap<>();
                declared.put("name", column.getName());
                declared.put("type", column.getDataType().getLogicalType().asSerializableString());
                columns.add(declared);
            }
        }
        Map<String, String> options = new HashMap<>();
        Map<String, String> audits = new TreeMap<>();
        definition.getOptions().forEach((key, value) -> {
            if (key.startsWith(AUDIT_OPTION_PREFIX)) {
                audits.put(key.substring("ctasd.".length()), value);
            } else {
                options.put(key, value);
            }
        });
        Map<String, Object> declared = new LinkedHashMap<>();
        declared.put("columns", columns);
        declared.put("options", options);
        Map<String, Object> target = new LinkedHashMap<>();
        target.put("catalog", catalog);
        target.put("database", database);
        target.put("table", table);
        Map<String, Object> hook = new LinkedHashMap<>();
        hook.put("kind", kind);
        hook.put("if_not_exists", ifNotExists);
        hook.put("target", target);
        hook.put("table", declared);
        if (!audits.isEmpty()) {
            hook.put("audit_properties", audits);
        }
        return hook;
    }

    /** A job of one hook; `engine` (or null) watches it. */
    static Map<String, Object> job(String name, String mode, String engine, Map<String, Object> hook) {
        Map<String, Object> job = new LinkedHashMap<>();
        job.put("name", name);
        job.put("mode", mode);
        if (engine != null) {
            job.put("engine", engine);
        }
        List<Object> hooks = new ArrayList<>();
        hooks.add(hook);
        job.put("hooks", hooks);
        return job;
    }
}
