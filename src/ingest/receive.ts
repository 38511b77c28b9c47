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
}

export function otlpEncoding(contentType: string | null): OtlpEncoding {
  const type = (contentType ?? "").split(";")[0].trim().toLowerCase();
  if (type === "application/x-protobuf" || type === "application/protobuf") return "protobuf";
  if (type === "application/json") return "json";
  throw new HttpError(415, `Unsupported content type "${type || "none"}": send application/x-protobuf or application/json`);
}

const tooLarge = (what: string, limit: number) => new HttpError(413, `${what} exceeds the limit of ${limit} bytes`);

/**
 * Reads the raw OTLP body with its limits: the compressed size before reading when announced, and
 * the decompressed size while inflating, so a gzip bomb stops at the limit instead of filling memory.
 */
export async function readOtlpBody(request: Request, encoding: OtlpEncoding, limits: BodyLimits): Promise<OtlpBody> {
  const announced = Number(request.headers.get("content-length") ?? 0);
  if (announced > limits.maxBodyBytes) throw tooLarge("Request body", limits.maxBodyBytes);
  const raw = new Uint8Array(await request.arrayBuffer());
  if (raw.byteLength > limits.maxBodyBytes) throw tooLarge("Request body", limits.maxBodyBytes);
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
