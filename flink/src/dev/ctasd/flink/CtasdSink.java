package dev.ctasd.flink;

import java.io.IOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.api.common.RuntimeExecutionMode;
import org.apache.flink.configuration.ExecutionOptions;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.table.api.TableException;
import org.apache.flink.table.catalog.Column;
import org.apache.flink.table.catalog.StagedTable;
import org.apache.flink.table.connector.ChangelogMode;
import org.apache.flink.table.connector.sink.DynamicTableSink;
import org.apache.flink.table.connector.sink.SinkV2Provider;
import org.apache.flink.table.connector.sink.abilities.SupportsStaging;
import org.apache.flink.table.factories.DynamicTableFactory;
import org.apache.flink.table.factories.FactoryUtil;
import org.apache.flink.table.types.logical.LogicalType;

/**
 * Where a {@code CREATE TABLE … AS SELECT} into a ctasd catalog writes.
 * {@link #applyStaging} (in the client, at compile time) submits the
 * statement's table to ctasd as a job with one hook: ctasd refuses a
 * {@code CREATE TABLE AS} onto a table that exists, skips an {@code IF NOT
 * EXISTS} one, and answers where the rows go, its staging. The rows are
 * written there by Flink's own connector for the catalog's kind (the
 * filesystem connector, with the table's format); the staged table it
 * returns moves the job through ctasd as Flink moves.
 */
final class CtasdSink implements DynamicTableSink, SupportsStaging {
    /** How long a call from the JobManager may take: commit blocks its main thread. */
    private static final Duration JOB_MANAGER_TIMEOUT = Duration.ofSeconds(5);

    private final Remote remote;
    /** The password of a jdbc catalog's database, or null. */
    private final String password;
    private final DynamicTableFactory.Context context;
    /** The job ctasd made for this statement, once staged. */
    private Staged staged;

    CtasdSink(Remote remote, String password, DynamicTableFactory.Context context) {
        this.remote = remote;
        this.password = password;
        this.context = context;
    }

    /** ctasd's job for the statement: its id, where rows go, or that the hook is skipped. */
    private static final class Staged {
        final String job;
        final Map<String, String> sinkOptions;
        final boolean skipped;

        Staged(String job, Map<String, String> sinkOptions, boolean skipped) {
            this.job = job;
            this.sinkOptions = sinkOptions;
            this.skipped = skipped;
        }
    }

    @Override
    public ChangelogMode getChangelogMode(ChangelogMode requested) {
        return ChangelogMode.insertOnly();
    }

    @Override
    public StagedTable applyStaging(StagingContext staging) {
        Map<String, Object> hook = Staging.hook(kind(staging.getStagingPurpose()),
                staging.getStagingPurpose() == StagingPurpose.CREATE_TABLE_AS_IF_NOT_EXISTS, remote.catalog,
                context.getObjectIdentifier().getDatabaseName(), context.getObjectIdentifier().getObjectName(),
                context.getCatalogTable());
        boolean batch = context.getConfiguration().get(ExecutionOptions.RUNTIME_MODE) == RuntimeExecutionMode.BATCH;
        Map<String, Object> job = Staging.job("Flink " + context.getObjectIdentifier().asSummaryString(),
                batch ? "batch" : "streaming", remote.engine, hook);
        CtasdClient.Answer answer;
        try {
            answer = remote.client.post("/v1/jobs", job);
        } catch (IOException e) {
            throw new TableException("ctasd at " + remote.client.url() + " cannot be reached: " + e.getMessage(), e);
        }
        if (!answer.ok()) {
            throw new TableException("ctasd refused " + context.getObjectIdentifier().asSummaryString() + ": "
                    + answer.problem());
        }
        JsonNode submitted = answer.body.path("hooks").path(0);
        Map<String, String> sinkOptions = new HashMap<>();
        submitted.path("write_location").path("sink_options").properties()
                .forEach(e -> sinkOptions.put(e.getKey(), e.getValue().asText()));
        staged = new Staged(answer.body.path("id").asText(), sinkOptions, submitted.path("skipped").asBoolean(false));
        return new CtasdStagedTable(new Remote(remote.client.withTimeout(JOB_MANAGER_TIMEOUT), remote.catalog,
                remote.engine), staged.job);
    }

    private static String kind(StagingPurpose purpose) {
        switch (purpose) {
            case REPLACE_TABLE_AS:
                return "replace_table_as";
            case CREATE_OR_REPLACE_TABLE_AS:
                return "create_or_replace_table_as";
            default:
                return "create_table_as";
        }
    }

    @Override
    public SinkRuntimeProvider getSinkRuntimeProvider(Context sink) {
        if (staged == null) {
            throw new TableException("a ctasd catalog takes rows only through CREATE TABLE … AS SELECT made atomic: "
                    + "SET 'table.rtas-ctas.atomicity-enabled' = 'true'");
        }
        Map<String, String> options = new HashMap<>(staged.sinkOptions);
        if (!staged.skipped && "jdbc".equals(options.get("connector"))) {
            // Flink's JDBC connector may be missing: the staging table is written here.
            List<String> names = new ArrayList<>();
            List<LogicalType> types = new ArrayList<>();
            for (Column column : context.getCatalogTable().getResolvedSchema().getColumns()) {
                if (column.isPhysical()) {
                    names.add(column.getName());
                    types.add(column.getDataType().getLogicalType());
                }
            }
            return SinkV2Provider.of(new JdbcStagingSink(options.get("url"), options.get("table-name"),
                    options.get("username"), password, names, types));
        }
        if (staged.skipped || options.isEmpty()) {
            // IF NOT EXISTS onto a table that exists: the rows go nowhere.
            options.clear();
            options.put("connector", "blackhole");
        }
        DynamicTableSink writer = FactoryUtil.createDynamicTableSink(
                null,
                context.getObjectIdentifier(),
                context.getCatalogTable().copy(options),
                context.getEnrichmentOptions(),
                context.getConfiguration(),
                context.getClassLoader(),
                context.isTemporary());
        return writer.getSinkRuntimeProvider(sink);
    }

    @Override
    public DynamicTableSink copy() {
        CtasdSink copy = new CtasdSink(remote, password, context);
        copy.staged = staged;
        return copy;
    }

    @Override
    public String asSummaryString() {
        return "ctasd";
    }
}
