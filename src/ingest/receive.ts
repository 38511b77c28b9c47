import { gunzipSync } from "node:zlib";
import { HttpError } from "../lib/errors";

export type OtlpEncoding = "protobuf" | "json";

export interface OtlpBody {
  encoding: OtlpEncoding;
  bytes: Uint8Array;
}

export interface BodyLimits {
  maxBodyBytes: number;
  maxDecompressedBytes: number;
  /** Time any body may take before its pace is checked, ms. */
  bodyGraceMs: number;
  /** Pace a body must keep after the grace period, bytes per second on average. */
  bodyMinBytesPerSecond: number;
}

export function otlpEncoding(contentType: string | null): OtlpEncoding {
  const type = (contentType ?? "").split(";")[0].trim().toLowerCase();
  if (type === "application/x-protobuf" || type === "application/protobuf") return "protobuf";
  if (type === "application/json") return "json";
  throw new HttpError(415, `Unsupported content type "${type || "none"}": send application/x-protobuf or application/json`);
}

// The rest of a refused body is not read: the connection closes after the answer instead of waiting for it.
const closing = { connection: "close" };
const tooLarge = (what: string, limit: number) => new HttpError(413, `${what} exceeds the limit of ${limit} bytes`, closing);

/**
 * The body's bytes, as long as they keep coming: after `bodyGraceMs` the body must have arrived at
 * `bodyMinBytesPerSecond` on average, else the request ends with 408. A sender trickling bytes thus
 * holds its connection for seconds, not for as long as it likes.
 */
async function readPacedBody(body: ReadableStream<Uint8Array> | null, limits: BodyLimits): Promise<Uint8Array> {
  if (!body) return new Uint8Array(0);
  const reader = body.getReader();
  const started = performance.now();
  const chunks: Uint8Array[] = [];
  let received = 0;
  try {
    for (;;) {
      // The next byte is due when the bytes so far, plus it, would keep the minimum pace after the grace period.
      const dueInMs = started + limits.bodyGraceMs + ((received + 1) / limits.bodyMinBytesPerSecond) * 1000 - performance.now();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), Math.max(0, dueInMs))));
      const next = await Promise.race([reader.read(), late]).finally(() => clearTimeout(timer));
      if (next === "late") {
        throw new HttpError(
          408,
          `Request body arrived too slowly: after ${limits.bodyGraceMs} ms a body must arrive at ${limits.bodyMinBytesPerSecond} bytes/s or more`,
          closing,
        );
      }
      if (next.done) break;
      received += next.value.byteLength;
      if (received > limits.maxBodyBytes) throw tooLarge("Request body", limits.maxBodyBytes);
      chunks.push(next.value);
    }
  } catch (error) {
    reader.cancel().catch(() => {});
    throw error;
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, received);
}

/**
 * Reads the raw OTLP body with its limits: the compressed size before reading when announced, and
 * the decompressed size while inflating, so a gzip bomb stops at the limit instead of filling memory.
 */
export async function readOtlpBody(request: Request, encoding: OtlpEncoding, limits: BodyLimits): Promise<OtlpBody> {
  const announced = Number(request.headers.get("content-length") ?? 0);
  if (announced > limits.maxBodyBytes) throw tooLarge("Request body", limits.maxBodyBytes);
  const raw = await readPacedBody(request.body, limits);
  const contentEncoding = (request.headers.get("content-encoding") ?? "identity").trim().toLowerCase();
  if (contentEncoding === "identity" || contentEncoding === "") {
    if (raw.byteLength > limits.maxDecompressedBytes) throw tooLarge("Request body", limits.maxDecompressedBytes);
    return { encoding, bytes: raw };
  }
  if (contentEncoding !== "gzip") throw new HttpError(415, `Unsupported content encoding "${contentEncoding}": send gzip or none`);
  try {
    return { encoding, bytes: gunzipSync(raw, { maxOutputLength: limits.maxDecompressedBytes }) };
  } catch (error) {
    if ((error as { code?: string }).code === "ERR_BUFFER_TOO_LARGE") throw tooLarge("Decompressed body", limits.maxDecompressedBytes);
    throw new HttpError(400, "Body is not valid gzip");
  }
}
