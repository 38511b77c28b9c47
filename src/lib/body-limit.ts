import { HttpError } from "./errors";

/** OTLP receivers read their own bodies, with the ingest limits (INGEST_MAX_BODY_BYTES) and a read deadline. */
/** The body of a refused request is never read: the connection closes after the answer rather than wait for it. */
const unread = { connection: "close" };

const otlpPaths = new Set(["/v1/traces", "/v1/logs", "/v1/metrics"]);

/**
 * Refuses a request body before it is read, with a 413 or 411 `{error}` (Bun's own limit would answer
 * an empty 413). API bodies are JSON or forms that are read whole: they must announce their length,
 * at most `apiMaxBodyBytes`. OTLP bodies may be chunked; their receiver enforces its limit while reading.
 */
export function checkAnnouncedBody(request: Request, limits: { apiMaxBodyBytes: number; ingestMaxBodyBytes: number }): void {
  if (request.method === "GET" || request.method === "HEAD" || request.method === "OPTIONS") return;
  const otlp = otlpPaths.has(new URL(request.url).pathname);
  const limit = otlp ? limits.ingestMaxBodyBytes : limits.apiMaxBodyBytes;
  const announced = request.headers.get("content-length");
  if (announced === null) {
    if (!otlp && request.body !== null && request.headers.has("transfer-encoding")) {
      throw new HttpError(411, "Send the body with a Content-Length header", unread);
    }
    return;
  }
  if (Number(announced) > limit) throw new HttpError(413, `Request body exceeds the limit of ${limit} bytes`, unread);
}
