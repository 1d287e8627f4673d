// Client.java: a seckilld buyer client in Java (JDK 17, java.net.http, no
// libraries). Copy it into your service; docs/http-api.md explains each
// answer, docs/openapi.yaml is the contract. Run it as one source file:
//   java Client.java buy CAMPAIGN [QUANTITY [IDEMPOTENCY_KEY]] | order ID | pay ID | cancel ID
// with SECKILL_URL (http://localhost:8080), SECKILL_USER and, when the
// deployment signs identities, SECKILL_SECRET. Prints one JSON line; exit 0
// done, 1 refused (a documented error), 2 an unexpected answer, 3 gave up.
//
// What it does right, and why:
// - signs the buyer's identity (X-User-Id + X-User-Signature, HMAC-SHA256)
//   when the deployment has a user secret;
// - sends every purchase with an Idempotency-Key and retries with the SAME
//   key on a network error or a 503/429 (after Retry-After): a retry can
//   never buy twice, and an outcome_unknown is resolved by the retry;
// - treats 202 as "decided, not yet safe" and polls its Location until the
//   order is confirmed (a lost order is bought again under the same key);
// - turns every documented error code into SeckillError; anything else is
//   UnexpectedAnswer (a contract break worth an alert, never ignored).
import java.io.IOException;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

public class Client {
    // 503 and 429: nothing was decided (or, outcome_unknown, it may have
    // been): the same request, with the same Idempotency-Key, is safe again.
    static final Set<String> RETRY = Set.of("unavailable", "recovering", "outcome_unknown",
            "degraded_reserve_exhausted", "rate_limited");
    // Every other error code docs/http-api.md lists: a final answer.
    static final Set<String> REFUSALS = Set.of("bad_request", "unauthorized", "signature_malformed",
            "signature_expired", "signature_campaign", "signature_legacy", "not_found", "method_not_allowed",
            "request_timeout", "sold_out", "limit_reached", "not_started", "ended", "exists", "conflict",
            "cancelled", "rejected", "paid", "too_large", "uri_too_long", "expectation_failed",
            "headers_too_large", "not_implemented", "version_not_supported");

    static class SeckillError extends Exception {
        final int status;
        final String code;
        final String detail;

        SeckillError(int status, String code, String detail) {
            super(status + " " + code + ": " + detail);
            this.status = status;
            this.code = code;
            this.detail = detail;
        }
    }

    static class UnexpectedAnswer extends Exception {
        UnexpectedAnswer(String m) { super(m); }
    }

    static class GaveUp extends Exception {
        GaveUp(String m) { super(m); }
    }

    record Answer(int status, HttpResponse<String> response, Map<String, Object> doc) {}

    final String baseUrl, user, secret;
    final int attempts = 6;
    // seckilld speaks HTTP/1.1 (no h2c upgrade offered on every first request)
    final HttpClient http = HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
            .connectTimeout(Duration.ofSeconds(5)).build();

    Client(String baseUrl, String user, String secret) {
        this.baseUrl = baseUrl;
        this.user = user;
        this.secret = secret;
    }

    /** The buyer's headers (name, value, ...). The signature expires in 5
     *  minutes: sign per request (or per session), never store one. */
    String[] identity(String campaign) throws Exception {
        if (secret == null || secret.isEmpty()) return new String[] {"X-User-Id", user};
        long exp = System.currentTimeMillis() / 1000 + 300;
        String msg = user + "\n" + exp + (campaign != null ? "\n" + campaign : "");
        Mac mac = Mac.getInstance("HmacSHA256");
        mac.init(new SecretKeySpec(secret.getBytes(StandardCharsets.UTF_8), "HmacSHA256"));
        String hex = HexFormat.of().formatHex(mac.doFinal(msg.getBytes(StandardCharsets.UTF_8)));
        String sig = "v1=" + hex + ";exp=" + exp + (campaign != null ? ";c=" + campaign : "");
        return new String[] {"X-User-Id", user, "X-User-Signature", sig};
    }

    /** Sends until an answer in ok (statuses) or a final refusal. Retries
     *  network errors and RETRY codes after Retry-After: callers pass an
     *  Idempotency-Key wherever a retry must not act twice. */
    Answer call(String method, String path, Set<Integer> ok, String body, String... headers) throws Exception {
        for (int attempt = 1; attempt <= attempts; attempt++) {
            HttpRequest.Builder b = HttpRequest.newBuilder(URI.create(baseUrl + path))
                    .timeout(Duration.ofSeconds(10))
                    .method(method, body == null ? HttpRequest.BodyPublishers.noBody()
                                                 : HttpRequest.BodyPublishers.ofString(body));
            if (body != null) b.header("Content-Type", "application/json");
            for (int i = 0; i < headers.length; i += 2) b.header(headers[i], headers[i + 1]);
            HttpResponse<String> r;
            try {
                r = http.send(b.build(), HttpResponse.BodyHandlers.ofString());
            } catch (IOException e) {
                // refused, reset, timed out: the request may have been decided and only its answer lost
                Thread.sleep(Math.min(100L << attempt, 2000));
                continue;
            }
            Map<String, Object> doc = Json.parse(r.body(), r.statusCode());
            if (ok.contains(r.statusCode())) return new Answer(r.statusCode(), r, doc);
            Object code = doc.get("error");
            if (RETRY.contains(code) && (r.statusCode() == 429 || r.statusCode() == 503)) {
                Thread.sleep(1000L * Long.parseLong(r.headers().firstValue("Retry-After").orElse("1")));
                continue;
            }
            if (REFUSALS.contains(code) && r.statusCode() >= 400)
                throw new SeckillError(r.statusCode(), (String) code, String.valueOf(doc.get("message")));
            throw new UnexpectedAnswer(method + " " + path + ": " + r.statusCode() + " " + r.body());
        }
        throw new GaveUp(method + " " + path + ": no answer after " + attempts + " attempts");
    }

    /** Buys; returns the order once confirmed (a 201, or a 202 followed to its
     *  confirmation). The key makes every retry the same purchase. */
    Map<String, Object> buy(String campaign, int quantity, String key) throws Exception {
        String path = "/v1/campaigns/" + campaign + "/purchase"; // ids are [A-Za-z0-9_-]: nothing to escape
        long deadline = System.currentTimeMillis() + 30_000;
        while (true) {
            List<String> h = new ArrayList<>(List.of(identity(campaign)));
            h.addAll(List.of("Idempotency-Key", key));
            Answer a = call("POST", path, Set.of(200, 201, 202), "{\"quantity\":" + quantity + "}",
                            h.toArray(String[]::new));
            if (a.status() == 201) {
                a.doc().put("state", "confirmed");
                return a.doc();
            }
            if (a.status() == 200) return a.doc(); // the key's order moved on (paid, cancelled...): it is that order
            String location = a.response().headers().firstValue("Location")
                    .orElseThrow(() -> new UnexpectedAnswer("202 without a Location"));
            Map<String, Object> order = follow(location, deadline); // 202: decided, not yet safe
            if (order != null) return order;
            // lost before it was safe: the same key decides the purchase again
        }
    }

    /** Polls a 202's Location: the order once it is no longer pending, null if it was lost. */
    Map<String, Object> follow(String location, long deadline) throws Exception {
        while (System.currentTimeMillis() < deadline) {
            Answer a;
            try {
                a = call("GET", location, Set.of(200), null, identity(null));
            } catch (SeckillError e) {
                if (e.status == 404) return null; // "state":"lost"
                throw e;
            }
            if (!"pending".equals(a.doc().get("state"))) return a.doc();
            Thread.sleep(a.response().headers().firstValue("Retry-After")
                    .map(s -> 1000L * Long.parseLong(s)).orElse(200L));
        }
        throw new GaveUp("order " + location + " still pending");
    }

    Map<String, Object> order(String id) throws Exception {
        return call("GET", "/v1/orders/" + id, Set.of(200), null, identity(null)).doc();
    }

    /** Paying or cancelling twice is 200 again: safe to retry. */
    Map<String, Object> act(String id, String what) throws Exception {
        return call("POST", "/v1/orders/" + id + "/" + what, Set.of(200), null, identity(null)).doc();
    }

    public static void main(String[] args) throws Exception {
        String url = System.getenv().getOrDefault("SECKILL_URL", "http://localhost:8080");
        Client c = new Client(url, System.getenv("SECKILL_USER"), System.getenv("SECKILL_SECRET"));
        Map<String, Object> out = new LinkedHashMap<>();
        int rc = 0;
        try {
            switch (args.length > 0 ? args[0] : "") {
                case "buy" -> out = c.buy(args[1], args.length > 2 ? Integer.parseInt(args[2]) : 1,
                                          args.length > 3 ? args[3] : UUID.randomUUID().toString());
                case "order" -> out = c.order(args[1]);
                case "pay", "cancel" -> out = c.act(args[1], args[0]);
                default -> {
                    System.err.println("usage: java Client.java buy CAMPAIGN [QUANTITY [KEY]] | order ID"
                                       + " | pay ID | cancel ID");
                    System.exit(2);
                }
            }
        } catch (SeckillError e) {
            out.put("refused", e.code);
            out.put("status", e.status);
            out.put("message", e.detail);
            rc = 1;
        } catch (UnexpectedAnswer e) {
            out.put("unexpected", e.getMessage());
            rc = 2;
        } catch (GaveUp e) {
            out.put("gave_up", e.getMessage());
            rc = 3;
        }
        System.out.println(Json.write(out));
        System.exit(rc);
    }

    /** The flat JSON objects seckilld answers (string, integer, boolean and
     *  null values): enough here; use your JSON library in a real service. */
    static final class Json {
        static Map<String, Object> parse(String s, int status) throws UnexpectedAnswer {
            Map<String, Object> m = new LinkedHashMap<>();
            String t = s.strip();
            if (t.isEmpty()) return m;
            int[] i = {0};
            try {
                expect(t, i, '{');
                skip(t, i);
                if (t.charAt(i[0]) == '}') return m;
                do {
                    skip(t, i);
                    String k = string(t, i);
                    expect(t, i, ':');
                    skip(t, i);
                    m.put(k, value(t, i));
                    skip(t, i);
                } while (t.charAt(i[0]++) == ',');
                if (t.charAt(i[0] - 1) != '}') throw new IllegalArgumentException("expected }");
            } catch (RuntimeException e) {
                throw new UnexpectedAnswer(status + " with a body that is not a flat JSON object: " + s);
            }
            return m;
        }

        static Object value(String t, int[] i) {
            char c = t.charAt(i[0]);
            if (c == '"') return string(t, i);
            int j = i[0];
            while (j < t.length() && ",} \n".indexOf(t.charAt(j)) < 0) j++;
            String w = t.substring(i[0], j);
            i[0] = j;
            return switch (w) {
                case "true" -> Boolean.TRUE;
                case "false" -> Boolean.FALSE;
                case "null" -> null;
                default -> Long.parseLong(w);
            };
        }

        static String string(String t, int[] i) {
            expect(t, i, '"');
            StringBuilder b = new StringBuilder();
            for (char c; (c = t.charAt(i[0]++)) != '"';) {
                if (c != '\\') {
                    b.append(c);
                    continue;
                }
                char e = t.charAt(i[0]++);
                switch (e) {
                    case 'n' -> b.append('\n');
                    case 't' -> b.append('\t');
                    case 'r' -> b.append('\r');
                    case 'b' -> b.append('\b');
                    case 'f' -> b.append('\f');
                    case 'u' -> {
                        b.append((char) Integer.parseInt(t.substring(i[0], i[0] + 4), 16));
                        i[0] += 4;
                    }
                    default -> b.append(e);
                }
            }
            return b.toString();
        }

        static void skip(String t, int[] i) {
            while (Character.isWhitespace(t.charAt(i[0]))) i[0]++;
        }

        static void expect(String t, int[] i, char c) {
            skip(t, i);
            if (t.charAt(i[0]++) != c) throw new IllegalArgumentException("expected " + c);
        }

        static String write(Map<String, Object> m) {
            StringBuilder b = new StringBuilder("{");
            for (Map.Entry<String, Object> e : m.entrySet()) {
                if (b.length() > 1) b.append(',');
                b.append(quote(e.getKey())).append(':');
                Object v = e.getValue();
                b.append(v instanceof String s ? quote(s) : String.valueOf(v));
            }
            return b.append('}').toString();
        }

        static String quote(String s) {
            StringBuilder b = new StringBuilder("\"");
            for (char c : s.toCharArray()) {
                if (c == '"' || c == '\\') b.append('\\').append(c);
                else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
                else b.append(c);
            }
            return b.append('"').toString();
        }
    }
}
