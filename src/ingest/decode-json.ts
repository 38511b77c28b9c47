import { setOwn, type AttributeValue, type Attributes } from "./attributes";
import { DecodedTracesBuilder, DecodeError, MAX_VALUE_DEPTH, SPAN_KINDS, STATUS_CODES, tooDeep, type DecodedScopeSpans, type DecodedSpan, type DecodedTraces } from "./decode-model";

type Json = unknown;

const shapeError = (path: string, expected: string) => new DecodeError(`Invalid OTLP/JSON body: ${path} must be ${expected}`);

export function jsonArray(value: Json, path: string): Json[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) throw shapeError(path, "an array");
  return value;
}

export function jsonObject(value: Json, path: string): Record<string, Json> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw shapeError(path, "an object");
  return value as Record<string, Json>;
}

export const optionalObject = (value: Json, path: string) => (value === undefined || value === null ? {} : jsonObject(value, path));
export const jsonString = (value: Json) => (typeof value === "string" ? value : value === undefined || value === null ? "" : String(value));

/** OTLP/JSON ids are hex strings (not base64 as in the generic protobuf JSON mapping). */
export const jsonId = (value: Json) => jsonString(value).toLowerCase();

/** 64-bit unsigned nanoseconds: a decimal string (exact) or a number (exact only up to 2^53). */
export function jsonNanos(value: Json): string {
  if (typeof value === "string" && /^\d+$/.test(value)) return value.length > 1 && value[0] === "0" ? BigInt(value).toString() : value;
  if (typeof value === "number" && Number.isFinite(value) && value >= 0) return BigInt(Math.trunc(value)).toString();
  return "0";
}

function jsonUint32(value: Json): number {
  const number = typeof value === "string" ? Number(value) : value;
  return typeof number === "number" && Number.isInteger(number) ? number >>> 0 : 0;
}

function jsonEnum<T>(value: Json, names: readonly T[], prefix: string): T {
  if (typeof value === "number") return names[value] ?? names[0];
  if (typeof value === "string") {
    const index = Number(value);
    if (Number.isInteger(index)) return names[index] ?? names[0];
    const name = value.startsWith(prefix) ? value.slice(prefix.length).toLowerCase() : value.toLowerCase();
    return names.find((candidate) => candidate === name) ?? names[0];
  }
  return names[0];
}

function jsonInt(value: Json): number | string | null {
  if (typeof value === "number") return Number.isFinite(value) ? Math.trunc(value) : null;
  if (typeof value === "string" && /^-?\d+$/.test(value)) {
    const number = Number(value);
    return Number.isSafeInteger(number) ? number : BigInt(value).toString();
  }
  return null;
}

export function jsonAnyValue(value: Json, depth = 0): AttributeValue {
  if (typeof value !== "object" || value === null) return null;
  if (depth > MAX_VALUE_DEPTH) throw tooDeep();
  const any = value as Record<string, Json>;
  if ("stringValue" in any) return jsonString(any.stringValue);
  if ("boolValue" in any) return any.boolValue === true || any.boolValue === "true";
  if ("intValue" in any) return jsonInt(any.intValue);
  if ("doubleValue" in any) return typeof any.doubleValue === "number" ? any.doubleValue : Number(any.doubleValue);
  if ("arrayValue" in any) {
    const values = (any.arrayValue as { values?: Json } | null)?.values;
    return Array.isArray(values) ? values.map((item) => jsonAnyValue(item, depth + 1)) : [];
  }
  if ("kvlistValue" in any) {
    const object: Record<string, AttributeValue> = {};
    const values = (any.kvlistValue as { values?: Json } | null)?.values;
    if (Array.isArray(values)) for (const entry of values) if (isKeyValue(entry)) setOwn(object, entry.key, jsonAnyValue(entry.value, depth + 1));
    return object;
  }
  if ("bytesValue" in any) return jsonString(any.bytesValue);
  return null;
}

const isKeyValue = (entry: Json): entry is { key: string; value: Json } =>
  typeof entry === "object" && entry !== null && typeof (entry as { key?: Json }).key === "string";

export function jsonAttributes(value: Json, path: string): Attributes {
  const attributes: Attributes = new Map();
  for (const entry of jsonArray(value, path)) if (isKeyValue(entry)) attributes.set(entry.key, jsonAnyValue(entry.value));
  return attributes;
}

function jsonSpan(value: Json, path: string): DecodedSpan {
  const span = jsonObject(value, path);
  const status = optionalObject(span.status, `${path}.status`);
  return {
    traceId: jsonId(span.traceId),
    spanId: jsonId(span.spanId),
    parentSpanId: jsonId(span.parentSpanId),
    traceState: jsonString(span.traceState),
    flags: jsonUint32(span.flags),
    name: jsonString(span.name),
    kind: jsonEnum(span.kind, SPAN_KINDS, "SPAN_KIND_"),
    startTimeUnixNano: jsonNanos(span.startTimeUnixNano),
    endTimeUnixNano: jsonNanos(span.endTimeUnixNano),
    attributes: jsonAttributes(span.attributes, `${path}.attributes`),
    events: jsonArray(span.events, `${path}.events`).map((item, index) => {
      const event = jsonObject(item, `${path}.events[${index}]`);
      return { timeUnixNano: jsonNanos(event.timeUnixNano), name: jsonString(event.name), attributes: jsonAttributes(event.attributes, `${path}.events[${index}].attributes`) };
    }),
    links: jsonArray(span.links, `${path}.links`).map((item, index) => {
      const link = jsonObject(item, `${path}.links[${index}]`);
      return {
        traceId: jsonId(link.traceId),
        spanId: jsonId(link.spanId),
        traceState: jsonString(link.traceState),
        flags: jsonUint32(link.flags),
        attributes: jsonAttributes(link.attributes, `${path}.links[${index}].attributes`),
      };
    }),
    statusCode: jsonEnum(status.code, STATUS_CODES, "STATUS_CODE_"),
    statusMessage: jsonString(status.message),
  };
}

/** The body as a JSON object; DecodeError when it is not one. */
export function parseJsonBody(body: string | Uint8Array): Record<string, Json> {
  let parsed: Json;
  try {
    parsed = JSON.parse(typeof body === "string" ? body : new TextDecoder().decode(body));
  } catch (error) {
    throw new DecodeError(`Body is not valid JSON: ${(error as Error).message}`);
  }
  return jsonObject(parsed, "the body");
}

/** Decodes an OTLP/JSON `ExportTraceServiceRequest` body. Throws DecodeError when the body is not one. */
export function decodeJson(body: string | Uint8Array): DecodedTraces {
  const request = parseJsonBody(body);
  const builder = new DecodedTracesBuilder();
  jsonArray(request.resourceSpans, "resourceSpans").forEach((item, r) => {
    const path = `resourceSpans[${r}]`;
    const jsonResourceSpans = jsonObject(item, path);
    const resource = optionalObject(jsonResourceSpans.resource, `${path}.resource`);
    const resourceSpans = builder.resource(jsonAttributes(resource.attributes, `${path}.resource.attributes`));
    jsonArray(jsonResourceSpans.scopeSpans, `${path}.scopeSpans`).forEach((item, s) => {
      const scopePath = `${path}.scopeSpans[${s}]`;
      const jsonScopeSpans = jsonObject(item, scopePath);
      const scope = optionalObject(jsonScopeSpans.scope, `${scopePath}.scope`);
      const scopeSpans: DecodedScopeSpans = { scope: { name: jsonString(scope.name), version: jsonString(scope.version) }, spans: [] };
      resourceSpans.scopeSpans.push(scopeSpans);
      jsonArray(jsonScopeSpans.spans, `${scopePath}.spans`).forEach((span, index) => builder.add(scopeSpans, jsonSpan(span, `${scopePath}.spans[${index}]`)));
    });
  });
  return builder.traces;
}
