package dev.ctasd.flink;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.table.catalog.Column;
import org.apache.flink.table.catalog.ResolvedCatalogTable;

/** A table Flink declares, as ctasd's job submission takes it. */
final class Staging {
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
        Map<String, Object> declared = new LinkedHashMap<>();
        declared.put("columns", columns);
        declared.put("options", new HashMap<>(definition.getOptions()));
        Map<String, Object> target = new LinkedHashMap<>();
        target.put("catalog", catalog);
        target.put("database", database);
        target.put("table", table);
        Map<String, Object> hook = new LinkedHashMap<>();
        hook.put("kind", kind);
        hook.put("if_not_exists", ifNotExists);
        hook.put("target", target);
        hook.put("table", declared);
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
