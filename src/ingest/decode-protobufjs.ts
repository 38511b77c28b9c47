import { join } from "node:path";
import protobuf from "protobufjs";
import { setOwn, type AttributeValue, type Attributes } from "./attributes";
import { bytesToBase64, bytesToHex, DecodedTracesBuilder, DecodeError, SPAN_KINDS, STATUS_CODES, type DecodedScopeSpans, type DecodedTraces } from "./decode-model";

const PROTO_DIR = join(import.meta.dir, "..", "..", "proto");

/** A message type of the vendored OTLP schema, loaded from its file (`opentelemetry/proto/…`). */
export function loadOtlpType(file: string, type: string) {
  const root = new protobuf.Root();
  root.resolvePath = (_origin, target) => join(PROTO_DIR, target);
  root.loadSync(file);
  return root.lookupType(type);
}

const ExportTraceServiceRequest = loadOtlpType("opentelemetry/proto/collector/trace/v1/trace_service.proto", "opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest");

/** protobufjs's 64-bit integers (long.js). */
export interface LongValue {
  toNumber(): number;
  toString(): string;
}
export interface PbAnyValue {
  value?: "stringValue" | "boolValue" | "intValue" | "doubleValue" | "arrayValue" | "kvlistValue" | "bytesValue";
  stringValue: string;
  boolValue: boolean;
  intValue: LongValue | number;
  doubleValue: number;
  arrayValue: { values: PbAnyValue[] };
  kvlistValue: { values: PbKeyValue[] };
  bytesValue: Uint8Array;
}
export interface PbKeyValue {
  key: string;
  value?: PbAnyValue | null;
}
interface PbSpan {
  traceId: Uint8Array;
  spanId: Uint8Array;
  traceState: string;
  parentSpanId: Uint8Array;
  flags: number;
  name: string;
  kind: number;
  startTimeUnixNano: LongValue | number;
  endTimeUnixNano: LongValue | number;
  attributes: PbKeyValue[];
  events: { timeUnixNano: LongValue | number; name: string; attributes: PbKeyValue[] }[];
  links: { traceId: Uint8Array; spanId: Uint8Array; traceState: string; flags: number; attributes: PbKeyValue[] }[];
  status?: { code: number; message: string } | null;
}
interface PbRequest {
  resourceSpans: {
    resource?: { attributes: PbKeyValue[] } | null;
    scopeSpans: { scope?: { name: string; version: string } | null; spans: PbSpan[] }[];
  }[];
}

export const unsignedDecimal = (value: LongValue | number) => (typeof value === "number" ? String(value) : value.toString());

function signedInt(value: LongValue | number): number | string {
  if (typeof value === "number") return value;
  const number = value.toNumber();
  return Number.isSafeInteger(number) ? number : value.toString();
}

export function pbAnyValue(any: PbAnyValue | null | undefined): AttributeValue {
  switch (any?.value) {
    case "stringValue":
      return any.stringValue;
    case "boolValue":
      return any.boolValue;
    case "intValue":
      return signedInt(any.intValue);
    case "doubleValue":
      return any.doubleValue;
    case "arrayValue":
      return any.arrayValue.values.map(pbAnyValue);
    case "kvlistValue": {
      const object: Record<string, AttributeValue> = {};
      for (const entry of any.kvlistValue.values) setOwn(object, entry.key, pbAnyValue(entry.value));
      return object;
    }
    case "bytesValue":
      return bytesToBase64(any.bytesValue);
    default:
      return null;
  }
}

export function pbAttributes(keyValues: PbKeyValue[]): Attributes {
  const attributes: Attributes = new Map();
  for (const entry of keyValues) attributes.set(entry.key, pbAnyValue(entry.value));
  return attributes;
}

/**
 * Decodes an OTLP/protobuf `ExportTraceServiceRequest` with protobufjs over the vendored schema. The
 * reference decoder: `decodeProtobuf` (the hand-written wire decoder) is tested equal to it.
 */
export function decodeProtobufWithProtobufjs(bytes: Uint8Array): DecodedTraces {
  let request: PbRequest;
  try {
    request = ExportTraceServiceRequest.decode(bytes) as unknown as PbRequest;
  } catch (error) {
    throw new DecodeError(`Body is not a valid OTLP protobuf ExportTraceServiceRequest: ${(error as Error).message}`);
  }
  const builder = new DecodedTracesBuilder();
  for (const pbResourceSpans of request.resourceSpans) {
    const resourceSpans = builder.resource(pbAttributes(pbResourceSpans.resource?.attributes ?? []));
    for (const pbScopeSpans of pbResourceSpans.scopeSpans) {
      const scopeSpans: DecodedScopeSpans = {
        scope: { name: pbScopeSpans.scope?.name ?? "", version: pbScopeSpans.scope?.version ?? "" },
        spans: [],
      };
      resourceSpans.scopeSpans.push(scopeSpans);
      for (const span of pbScopeSpans.spans) {
        builder.add(scopeSpans, {
          traceId: bytesToHex(span.traceId),
          spanId: bytesToHex(span.spanId),
          parentSpanId: bytesToHex(span.parentSpanId),
          traceState: span.traceState,
          flags: span.flags >>> 0,
          name: span.name,
          kind: SPAN_KINDS[span.kind] ?? "unspecified",
          startTimeUnixNano: unsignedDecimal(span.startTimeUnixNano),
          endTimeUnixNano: unsignedDecimal(span.endTimeUnixNano),
          attributes: pbAttributes(span.attributes),
          events: span.events.map((event) => ({
            timeUnixNano: unsignedDecimal(event.timeUnixNano),
            name: event.name,
            attributes: pbAttributes(event.attributes),
          })),
          links: span.links.map((link) => ({
            traceId: bytesToHex(link.traceId),
            spanId: bytesToHex(link.spanId),
            traceState: link.traceState,
            flags: link.flags >>> 0,
            attributes: pbAttributes(link.attributes),
          })),
          statusCode: STATUS_CODES[span.status?.code ?? 0] ?? "unset",
          statusMessage: span.status?.message ?? "",
        });
      }
    }
  }
  return builder.traces;
}
