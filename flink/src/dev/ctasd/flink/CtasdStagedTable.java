package dev.ctasd.flink;

import java.util.LinkedHashMap;
import java.util.Map;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.table.catalog.StagedTable;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import org.slf4j.MDC;

/**
 * A statement's ctasd job, carried to the JobManager inside the job graph,
 * told of Flink's moves there: {@link #begin} (the job is being built, no
 * task has run) makes the staging ready; {@link #commit} (FINISHED)
 * publishes it; {@link #abort} (FAILED or CANCELED) discards it.
 *
 * <p>{@code begin} may refuse the job by throwing (only that job fails).
 * {@code commit} and {@code abort} never throw: one that throws stops the
 * JobManager process. They try a few times with short time-outs, and what
 * they could not tell ctasd is left to ctasd (its watcher, when the catalog
 * names an engine, or an operator), which finishes or discards the staging
 * from Flink's final status.
 */
final class CtasdStagedTable implements StagedTable {
    private static final long serialVersionUID = 1L;
    private static final Logger LOG = LoggerFactory.getLogger(CtasdStagedTable.class);
    /** Tries at commit and abort, a second apart. */
    private static final int TRIES = 3;

    private final Remote remote;
    private final String job;

    CtasdStagedTable(Remote remote, String job) {
        this.remote = remote;
        this.job = job;
    }

    private String jobPath() {
        return "/v1/jobs/" + CtasdClient.segment(job);
    }

    @Override
    public void begin() {
        // The JobManager names the Flink job in its log context; when it
        // does, ctasd keeps it as the job's engine id (an operator finds the
        // Flink job from ctasd's, and a watching engine follows it).
        String flinkJob = MDC.get("flink-job-id");
        try {
            if (flinkJob != null) {
                Map<String, Object> update = new LinkedHashMap<>();
                update.put("engine_job_id", flinkJob);
                CtasdClient.Answer attached = remote.client.patch(jobPath(), update);
                if (!attached.ok()) {
                    LOG.warn("ctasd job {} could not take Flink job id {}: {}", job, flinkJob, attached.problem());
                }
            }
            CtasdClient.Answer created = report("CREATED", null);
            if (!created.ok() && !"TRANSITION_ILLEGAL".equals(created.body == null ? null
                    : created.body.path("code").asText())) {
                throw new IllegalStateException("ctasd refused to prepare job " + job + ": " + created.problem());
            }
        } catch (java.io.IOException e) {
            throw new IllegalStateException("ctasd at " + remote.client.url() + " cannot be reached to prepare job "
                    + job + ": " + e.getMessage(), e);
        }
    }

    @Override
    public void commit() {
        settle("FINISHED", null);
    }

    @Override
    public void abort() {
        settle("FAILED", "the Flink job failed or was cancelled");
    }

    /** Tells ctasd the job ended, a few times at most; never throws. */
    private void settle(String status, String failure) {
        for (int attempt = 1; attempt <= TRIES; attempt++) {
            try {
                CtasdClient.Answer answer = report(status, failure);
                if (answer.ok()) {
                    LOG.info("ctasd job {} reported {}", job, status);
                    warnOfHeldBack(answer);
                    return;
                }
                LOG.warn("ctasd answered {} for job {}: {}", status, job, answer.problem());
                if (answer.status < 500) {
                    return;
                }
            } catch (Throwable e) {
                LOG.warn("ctasd could not be told job {} is {} (attempt {} of {}): {}", job, status, attempt, TRIES,
                        e.toString());
            }
            try {
                Thread.sleep(1000L);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                return;
            }
        }
        LOG.error("ctasd was not told job {} is {}; ctasd settles it from Flink's final status when an engine "
                + "watches it, or an operator does", job, status);
    }

    /**
     * A commit that audits held back publishes nothing, yet Flink's job has finished: the JobManager's log
     * says so, with where the staging is kept (quarantine) or that it was discarded.
     */
    private void warnOfHeldBack(CtasdClient.Answer answer) {
        for (JsonNode action : answer.body.path("actions_taken")) {
            String outcome = action.path("outcome").asText();
            if ("quarantined".equals(outcome) || "vetoed".equals(outcome)) {
                JsonNode hook =
                        answer.body.path("job").path("hooks").path(action.path("hook").asInt());
                LOG.warn("ctasd did not publish {}.{}.{} for job {} ({}): {}; staging {}",
                        hook.path("target").path("catalog").asText(), hook.path("target").path("database").asText(),
                        hook.path("target").path("table").asText(), job, outcome, action.path("last_error").asText(),
                        hook.path("write_location").path("name").asText());
            }
        }
    }

    private CtasdClient.Answer report(String status, String failure) throws java.io.IOException {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("status", status);
        if (failure != null) {
            body.put("failure", failure);
        }
        return remote.client.put(jobPath() + "/status", body);
    }
}
