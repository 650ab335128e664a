package dev.ctasd.flink;

import java.time.Duration;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;

import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.table.catalog.Catalog;
import org.apache.flink.table.factories.CatalogFactory;

/**
 * {@code CREATE CATALOG lake WITH ('type' = 'ctasd', 'url' = 'http://ctasd:8080')}:
 * a Flink catalog whose databases and tables are those of a catalog
 * registered in ctasd ({@code 'catalog'}, by default this catalog's name),
 * and whose {@code CREATE TABLE … AS SELECT} ctasd makes atomic.
 */
public final class CtasdCatalogFactory implements CatalogFactory {
    static final ConfigOption<String> URL =
            ConfigOptions.key("url").stringType().noDefaultValue().withDescription("ctasd's base URL");
    static final ConfigOption<String> CATALOG = ConfigOptions.key("catalog")
            .stringType()
            .noDefaultValue()
            .withDescription("the catalog registered in ctasd (default: this catalog's name)");
    static final ConfigOption<String> ENGINE = ConfigOptions.key("engine")
            .stringType()
            .noDefaultValue()
            .withDescription("the ctasd engine that watches these jobs as a safety net");
    static final ConfigOption<String> TOKEN =
            ConfigOptions.key("token").stringType().noDefaultValue().withDescription("a ctasd bearer token");
    static final ConfigOption<String> PASSWORD = ConfigOptions.key("password")
            .stringType()
            .noDefaultValue()
            .withDescription("the password of a jdbc catalog's database, which ctasd never hands out; "
                    + "the rows of a CTAS are written into its staging with it");
    static final ConfigOption<String> DEFAULT_DATABASE = ConfigOptions.key("default-database")
            .stringType()
            .noDefaultValue()
            .withDescription("the database of unqualified names (default: ctasd's default database)");

    /** How long a call from the client may take. */
    static final Duration CLIENT_TIMEOUT = Duration.ofSeconds(30);

    @Override
    public String factoryIdentifier() {
        return "ctasd";
    }

    @Override
    public Set<ConfigOption<?>> requiredOptions() {
        Set<ConfigOption<?>> required = new HashSet<>();
        required.add(URL);
        return required;
    }

    @Override
    public Set<ConfigOption<?>> optionalOptions() {
        Set<ConfigOption<?>> optional = new HashSet<>();
        optional.add(CATALOG);
        optional.add(ENGINE);
        optional.add(TOKEN);
        optional.add(DEFAULT_DATABASE);
        optional.add(PASSWORD);
        return optional;
    }

    @Override
    public Catalog createCatalog(Context context) {
        Map<String, String> options = context.getOptions();
        String url = options.get(URL.key());
        if (url == null || url.isEmpty()) {
            throw new IllegalArgumentException("a ctasd catalog needs 'url', ctasd's base URL");
        }
        String remote = options.getOrDefault(CATALOG.key(), context.getName());
        CtasdClient client = new CtasdClient(url, options.get(TOKEN.key()), CLIENT_TIMEOUT);
        return new CtasdCatalog(
                context.getName(),
                options.get(DEFAULT_DATABASE.key()),
                new Remote(client, remote, options.get(ENGINE.key())),
                options.get(PASSWORD.key()));
    }
}
