package dev.ctasd.flink;

import java.io.IOException;
import java.io.Serializable;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;

import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.JsonNode;
import org.apache.flink.shaded.jackson2.com.fasterxml.jackson.databind.ObjectMapper;

/**
 * ctasd's HTTP API as the catalog, the sink and the staged table call it:
 * JSON in and out, a bearer token when one is given, short time-outs. It
 * travels inside a staged table to the JobManager, so it holds only
 * strings; the HTTP client is made where it is used.
 */
final class CtasdClient implements Serializable {
    private static final long serialVersionUID = 1L;
    private static final ObjectMapper JSON = new ObjectMapper();

    private final String url;
    private final String token;
    private final Duration timeout;
    private transient HttpClient http;

    CtasdClient(String url, String token, Duration timeout) {
        this.url = url.endsWith("/") ? url.substring(0, url.length() - 1) : url;
        this.token = token;
        this.timeout = timeout;
    }

    /** The same client with another time-out per request. */
    CtasdClient withTimeout(Duration timeout) {
        return new CtasdClient(url, token, timeout);
    }

    /** An answer: its status and, when it has one, its JSON body. */
    static final class Answer {
        final int status;
        final JsonNode body;

        Answer(int status, JsonNode body) {
            this.status = status;
            this.body = body;
        }

        boolean ok() {
            return status >= 200 && status < 300;
        }

        /** A problem's code and detail, for messages. */
        String problem() {
            if (body == null) {
                return "HTTP " + status;
            }
            return body.path("code").asText("HTTP " + status) + ": " + body.path("detail").asText("");
        }
    }

    Answer get(String path) throws IOException {
        return send("GET", path, null);
    }

    Answer post(String path, Object body) throws IOException {
        return send("POST", path, body);
    }

    Answer put(String path, Object body) throws IOException {
        return send("PUT", path, body);
    }

    Answer patch(String path, Object body) throws IOException {
        return send("PATCH", path, body);
    }

    Answer delete(String path) throws IOException {
        return send("DELETE", path, null);
    }

    static String segment(String name) {
        return URLEncoder.encode(name, StandardCharsets.UTF_8).replace("+", "%20");
    }

    private synchronized HttpClient http() {
        if (http == null) {
            http = HttpClient.newBuilder()
                    .version(HttpClient.Version.HTTP_1_1)
                    .connectTimeout(timeout)
                    .followRedirects(HttpClient.Redirect.NEVER)
                    .build();
        }
        return http;
    }

    private Answer send(String method, String path, Object body) throws IOException {
        HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url + path))
                .timeout(timeout)
                .header("accept", "application/json");
        if (token != null && !token.isEmpty()) {
            request.header("authorization", "Bearer " + token);
        }
        if (body == null) {
            request.method(method, HttpRequest.BodyPublishers.noBody());
        } else {
            request.header("content-type", "application/json");
            request.method(method, HttpRequest.BodyPublishers.ofString(JSON.writeValueAsString(body)));
        }
        HttpResponse<String> response;
        try {
            response = http().send(request.build(), HttpResponse.BodyHandlers.ofString());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IOException("interrupted while asking ctasd at " + url, e);
        }
        JsonNode parsed = null;
        if (!response.body().isEmpty()) {
            try {
                parsed = JSON.readTree(response.body());
            } catch (IOException notJson) {
                parsed = null;
            }
        }
        return new Answer(response.statusCode(), parsed);
    }

    String url() {
        return url;
    }
}
