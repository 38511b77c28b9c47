import type { Attributes } from "./attributes";
import type { SpanRow } from "./row";

/** The body itself cannot be decoded: answer 400, nothing of it is stored. */
export class DecodeError extends Error {
  override name = "DecodeError";
}

export interface DecodedEvent {
  /** Unix epoch nanoseconds, decimal. */
  timeUnixNano: string;
  name: string;
  attributes: Attributes;
}

export interface DecodedLink {
  traceId: string;
  spanId: string;
  traceState: string;
  flags: number;
  attributes: Attributes;
}

export interface DecodedSpan {
  /** 32 lowercase hex characters. */
  traceId: string;
  /** 16 lowercase hex characters. */
  spanId: string;
  /** "" for root spans. */
  parentSpanId: string;
  traceState: string;
  flags: number;
  name: string;
  kind: SpanRow["kind"];
  /** Unix epoch nanoseconds as decimal strings: exact over the whole 64-bit range. */
  startTimeUnixNano: string;
  endTimeUnixNano: string;
  attributes: Attributes;
  events: DecodedEvent[];
  links: DecodedLink[];
  statusCode: SpanRow["status_code"];
  statusMessage: string;
}

export interface DecodedScope {
  name: string;
  version: string;
}

export interface DecodedScopeSpans {
  scope: DecodedScope;
  spans: DecodedSpan[];
}

export interface DecodedResourceSpans {
  resource: Attributes;
  scopeSpans: DecodedScopeSpans[];
}

/** A span left out of the request: counted in the OTLP `partialSuccess.rejectedSpans`. */
export interface RejectedSpan {
  reason: string;
}

export interface DecodedTraces {
  resourceSpans: DecodedResourceSpans[];
  /** Valid spans, all present in `resourceSpans`. */
  spanCount: number;
  rejected: RejectedSpan[];
}

export const SPAN_KINDS: readonly SpanRow["kind"][] = ["unspecified", "internal", "server", "client", "producer", "consumer"];
export const STATUS_CODES: readonly SpanRow["status_code"][] = ["unset", "ok", "error"];

/** Arrays and key-value lists inside attribute values nest at most this deep; deeper bodies are refused. */
export const MAX_VALUE_DEPTH = 32;

export const tooDeep = () => new DecodeError(`Attribute values nest deeper than ${MAX_VALUE_DEPTH} levels`);

const HEX_BYTES = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));

export function bytesToHex(bytes: Uint8Array): string {
  let hex = "";
  for (let i = 0; i < bytes.length; i++) hex += HEX_BYTES[bytes[i]];
  return hex;
}

export const bytesToBase64 = (bytes: Uint8Array) => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64");

const ALL_ZERO = /^0*$/;
const TRACE_ID = /^[0-9a-f]{32}$/;
const SPAN_ID = /^[0-9a-f]{16}$/;

/** ClickHouse DateTime64(9) counts nanoseconds in a signed 64-bit integer. */
const MAX_TIME_NS = "9223372036854775807";

/** An id as quoted in a rejection reason, cut short: ids come from the client and can be anything. */
const quoted = (id: string) => JSON.stringify(id.length > 40 ? `${id.slice(0, 40)}…` : id);

/** Why a span must be rejected, or null. Ids are already hex; times decimal strings. */
function spanProblem(traceId: string, spanId: string, startTimeUnixNano: string): string | null {
  if (!TRACE_ID.test(traceId) || ALL_ZERO.test(traceId)) return `invalid trace id ${quoted(traceId)}: expected 16 bytes, not all zero`;
  if (!SPAN_ID.test(spanId) || ALL_ZERO.test(spanId)) return `invalid span id ${quoted(spanId)} in trace ${traceId}: expected 8 bytes, not all zero`;
  if (startTimeUnixNano === "0") return `span ${spanId} has no start time`;
  if (compareDecimal(startTimeUnixNano, MAX_TIME_NS) > 0) return `span ${spanId} starts after 2262`;
  return null;
}

/** Builds the normalized request, filing each span as accepted or rejected. */
export class DecodedTracesBuilder {
  readonly traces: DecodedTraces = { resourceSpans: [], spanCount: 0, rejected: [] };

  resource(attributes: Attributes): DecodedResourceSpans {
    const resourceSpans: DecodedResourceSpans = { resource: attributes, scopeSpans: [] };
    this.traces.resourceSpans.push(resourceSpans);
    return resourceSpans;
  }

  add(scopeSpans: DecodedScopeSpans, span: DecodedSpan): void {
    const problem = spanProblem(span.traceId, span.spanId, span.startTimeUnixNano);
    if (problem) {
      this.traces.rejected.push({ reason: problem });
      return;
    }
    if (ALL_ZERO.test(span.parentSpanId)) span.parentSpanId = "";
    else if (!SPAN_ID.test(span.parentSpanId)) {
      this.traces.rejected.push({ reason: `invalid parent span id ${quoted(span.parentSpanId)} in span ${span.spanId}: expected 8 bytes or none` });
      return;
    }
    const end = span.endTimeUnixNano;
    if (compareDecimal(end, span.startTimeUnixNano) < 0 || compareDecimal(end, MAX_TIME_NS) > 0) span.endTimeUnixNano = span.startTimeUnixNano;
    scopeSpans.spans.push(span);
    this.traces.spanCount++;
  }
}

/** Compares two canonical non-negative decimal strings. */
function compareDecimal(a: string, b: string): number {
  if (a.length !== b.length) return a.length - b.length;
  return a < b ? -1 : a > b ? 1 : 0;
}
