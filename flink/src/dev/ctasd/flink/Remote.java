package dev.ctasd.flink;

import java.io.Serializable;

/** The catalog registered in ctasd that a Flink catalog stands for, and how to reach it. */
final class Remote implements Serializable {
    private static final long serialVersionUID = 1L;

    final CtasdClient client;
    /** The catalog's name in ctasd. */
    final String catalog;
    /** The ctasd engine that watches jobs, or null. */
    final String engine;

    Remote(CtasdClient client, String catalog, String engine) {
        this.client = client;
        this.catalog = catalog;
        this.engine = engine;
    }

    String catalogPath() {
        return "/v1/catalogs/" + CtasdClient.segment(catalog);
    }

    String tablePath(String database, String table) {
        return catalogPath() + "/databases/" + CtasdClient.segment(database) + "/tables/"
                + CtasdClient.segment(table);
    }
}
