import type { OtlpSignal } from "./pipeline";
import type { OtlpEncoding } from "./receive";

export interface ExportOutcome {
  /** Spans or log records left out. */
  rejected: number;
  errorMessage: string;
}

/** The partial-success count's name in each signal's OTLP/JSON answer. */
const REJECTED_FIELD: Record<OtlpSignal, string> = { traces: "rejectedSpans", logs: "rejectedLogRecords" };

function varint(value: number, out: number[]) {
  while (value > 0x7f) {
    out.push((value & 0x7f) | 0x80);
    value = Math.floor(value / 128);
  }
  out.push(value);
}

/**
 * `ExportTraceServiceResponse` or `ExportLogsServiceResponse` in protobuf (the same fields): empty on full success,
 * else `partial_success` (field 1).
 */
export function encodeExportResponse(outcome: ExportOutcome): Uint8Array {
  if (outcome.rejected === 0 && !outcome.errorMessage) return new Uint8Array(0);
  const partial: number[] = [];
  if (outcome.rejected > 0) {
    partial.push(0x08);
    varint(outcome.rejected, partial);
  }
  const message = new TextEncoder().encode(outcome.errorMessage);
  if (message.length > 0) {
    partial.push(0x12);
    varint(message.length, partial);
    partial.push(...message);
  }
  const out: number[] = [0x0a];
  varint(partial.length, out);
  out.push(...partial);
  return Uint8Array.from(out);
}

/** The OTLP/HTTP answer in the request's own encoding. */
export function exportResponse(outcome: ExportOutcome, encoding: OtlpEncoding, signal: OtlpSignal): Response {
  if (encoding === "protobuf") {
    return new Response(encodeExportResponse(outcome), { headers: { "content-type": "application/x-protobuf" } });
  }
  const body = outcome.rejected > 0 || outcome.errorMessage ? { partialSuccess: { [REJECTED_FIELD[signal]]: outcome.rejected, errorMessage: outcome.errorMessage } } : {};
  return Response.json(body);
}
