package dev.ctasd.flink;

import java.util.HashSet;
import java.util.Set;

import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.table.connector.sink.DynamicTableSink;
import org.apache.flink.table.factories.DynamicTableSinkFactory;

/**
 * The sink of a ctasd catalog's tables, which its {@code getFactory()}
 * hands the planner: a {@code CREATE TABLE … AS SELECT} into the catalog
 * needs no {@code connector} option. The table's own options (such as
 * {@code format}) go to ctasd with the table's definition.
 */
final class CtasdTableFactory implements DynamicTableSinkFactory {
    private final Remote remote;
    private final String password;

    CtasdTableFactory(Remote remote, String password) {
        this.remote = remote;
        this.password = password;
    }

    @Override
    public String factoryIdentifier() {
        return "ctasd";
    }

    @Override
    public Set<ConfigOption<?>> requiredOptions() {
        return new HashSet<>();
    }

    @Override
    public Set<ConfigOption<?>> optionalOptions() {
        return new HashSet<>();
    }

    @Override
    public DynamicTableSink createDynamicTableSink(Context context) {
        return new CtasdSink(remote, password, context);
    }
}
