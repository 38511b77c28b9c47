import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { join } from "node:path";
import protobuf from "protobufjs";
import { context, SpanKind, SpanStatusCode, trace, TraceFlags } from "@opentelemetry/api";
import { JsonTraceSerializer, ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes } from "@opentelemetry/resources";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor, type ReadableSpan } from "@opentelemetry/sdk-trace-base";
import { DecodeError, decodeJson, decodeProtobuf, decodeProtobufWithProtobufjs, type DecodedTraces } from "../src/ingest/decode";

setDefaultTimeout(60_000);

const TRACE_ID = "0af7651916cd43dd8448eb211c80319c";
const PARENT_ID = "b7ad6b7169203331";
const LINKED_TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736";
const LINKED_SPAN_ID = "00f067aa0ba902b7";

/** Spans recorded by the real OpenTelemetry SDK, exactly as its exporters see them. */
function recordSpans(): ReadableSpan[] {
  const exporter = new InMemorySpanExporter();
  const provider = new BasicTracerProvider({
    resource: resourceFromAttributes({ "service.name": "checkout", "deployment.replicas": 3 }),
    spanProcessors: [new SimpleSpanProcessor(exporter)],
  });
  const tracer = provider.getTracer("decode-test", "2.1.0");
  const parent = { traceId: TRACE_ID, spanId: PARENT_ID, traceFlags: TraceFlags.SAMPLED, isRemote: true };
  const span = tracer.startSpan(
    "chat gpt-4o",
    {
      kind: SpanKind.CLIENT,
      startTime: [1_763_000_000, 123_456_789],
      attributes: { text: "héllo ✓", count: 42, ratio: 0.25, flag: true, list: ["a", "b"], numbers: [1, 2.5], big: 2 ** 60 },
      links: [{ context: { traceId: LINKED_TRACE_ID, spanId: LINKED_SPAN_ID, traceFlags: 1 }, attributes: { reason: "retry" } }],
    },
    trace.setSpanContext(context.active(), parent),
  );
  span.addEvent("gen_ai.choice", { index: 0 }, [1_763_000_000, 623_456_789]);
  span.setStatus({ code: SpanStatusCode.ERROR, message: "rate limited" });
  span.end([1_763_000_001, 999_999_999]);
  tracer.startSpan("root", { startTime: [1_763_000_002, 1] }).end([1_763_000_002, 2]);
  return exporter.getFinishedSpans();
}

const recorded = recordSpans();
const protobufBody = () => ProtobufTraceSerializer.serializeRequest(recorded)!;
const jsonBody = () => new TextDecoder().decode(JsonTraceSerializer.serializeRequest(recorded)!);
const allSpans = (traces: DecodedTraces) => traces.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans));

// Requests the SDK cannot produce (bad ids, kvlists, bytes, odd field order) are encoded with protobufjs over proto/.
const root = new protobuf.Root();
root.resolvePath = (_origin, target) => join(import.meta.dir, "..", "proto", target);
root.loadSync("opentelemetry/proto/collector/trace/v1/trace_service.proto");
const ExportTraceServiceRequest = root.lookupType("opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest");
const encode = (request: object) => ExportTraceServiceRequest.encode(ExportTraceServiceRequest.fromObject(request)).finish();
const hexBytes = (hex: string) => Buffer.from(hex, "hex");

function varint(value: number): number[] {
  const bytes: number[] = [];
  for (; value >= 0x80; value >>>= 7) bytes.push((value & 0x7f) | 0x80);
  bytes.push(value);
  return bytes;
}

function requestWithSpans(spans: object[], resourceAttributes: object[] = []) {
  return encode({ resourceSpans: [{ resource: { attributes: resourceAttributes }, scopeSpans: [{ scope: { name: "s", version: "1" }, spans }] }] });
}

const validSpan = (overrides: object = {}) => ({
  traceId: hexBytes(TRACE_ID),
  spanId: hexBytes("1111111111111111"),
  name: "ok",
  startTimeUnixNano: "1763000000000000001",
  endTimeUnixNano: "1763000000000000002",
  ...overrides,
});

describe("decodeProtobuf on what the OpenTelemetry SDK exports", () => {
  test("ids are lowercase hex and nanosecond times exact", () => {
    const traces = decodeProtobuf(protobufBody());
    expect(traces.rejected).toEqual([]);
    expect(traces.spanCount).toBe(2);
    const [chat, root] = allSpans(traces);
    expect(chat.traceId).toBe(TRACE_ID);
    expect(chat.spanId).toMatch(/^[0-9a-f]{16}$/);
    expect(chat.parentSpanId).toBe(PARENT_ID);
    expect(chat.startTimeUnixNano).toBe("1763000000123456789");
    expect(chat.endTimeUnixNano).toBe("1763000001999999999");
    expect(chat.events[0]).toEqual({ timeUnixNano: "1763000000623456789", name: "gen_ai.choice", attributes: new Map([["index", 0]]) });
    expect(root.parentSpanId).toBe("");
    expect(root.traceId).not.toBe(TRACE_ID);
  });

  test("kind, status, flags, scope, resource, links and attribute types", () => {
    const traces = decodeProtobuf(protobufBody());
    const [chat] = allSpans(traces);
    expect(chat.kind).toBe("client");
    expect(chat.statusCode).toBe("error");
    expect(chat.statusMessage).toBe("rate limited");
    expect(chat.flags & 0xff).toBe(1);
    expect(traces.resourceSpans[0].scopeSpans[0].scope).toEqual({ name: "decode-test", version: "2.1.0" });
    expect(traces.resourceSpans[0].resource.get("service.name")).toBe("checkout");
    expect(traces.resourceSpans[0].resource.get("deployment.replicas")).toBe(3);
    expect(chat.links).toEqual([{ traceId: LINKED_TRACE_ID, spanId: LINKED_SPAN_ID, traceState: "", flags: expect.any(Number), attributes: new Map([["reason", "retry"]]) }]);
    expect(Object.fromEntries(chat.attributes)).toEqual({ text: "héllo ✓", count: 42, ratio: 0.25, flag: true, list: ["a", "b"], numbers: [1, 2.5], big: "1152921504606846976" });
  });

  test("the wire decoder equals protobufjs over proto/", () => {
    const body = protobufBody();
    expect(decodeProtobuf(body)).toEqual(decodeProtobufWithProtobufjs(body));
  });
});

describe("decodeJson on what the OpenTelemetry SDK exports", () => {
  test("gives the same spans as the protobuf encoding", () => {
    const fromJson = decodeJson(jsonBody());
    const fromProtobuf = decodeProtobuf(protobufBody());
    // The SDK's JSON encoder writes ints as JS numbers: 2^60 arrives rounded, every other value is equal.
    for (const span of [...allSpans(fromJson), ...allSpans(fromProtobuf)]) span.attributes.delete("big");
    expect(fromJson).toEqual(fromProtobuf);
  });

  test("accepts bytes as UTF-8 and ids in uppercase hex", () => {
    const body = jsonBody().replace(TRACE_ID, TRACE_ID.toUpperCase());
    const [chat] = allSpans(decodeJson(new TextEncoder().encode(body)));
    expect(chat.traceId).toBe(TRACE_ID);
  });

  test("enum names, numeric times and string ints", () => {
    const traces = decodeJson(
      JSON.stringify({
        resourceSpans: [
          {
            scopeSpans: [
              {
                spans: [
                  {
                    traceId: TRACE_ID,
                    spanId: PARENT_ID,
                    kind: "SPAN_KIND_SERVER",
                    startTimeUnixNano: 1763000000000000000,
                    endTimeUnixNano: "1763000000000000500",
                    status: { code: "STATUS_CODE_OK" },
                    attributes: [
                      { key: "tokens", value: { intValue: "9007199254740993" } },
                      { key: "small", value: { intValue: "-7" } },
                      { key: "nan", value: { doubleValue: "NaN" } },
                      { key: "blob", value: { bytesValue: "AAEC" } },
                      { key: "nested", value: { kvlistValue: { values: [{ key: "a", value: { arrayValue: { values: [{ boolValue: true }] } } }] } } },
                      { key: "empty", value: {} },
                    ],
                  },
                ],
              },
            ],
          },
        ],
      }),
    );
    const [span] = allSpans(traces);
    expect(span.kind).toBe("server");
    expect(span.statusCode).toBe("ok");
    expect(span.startTimeUnixNano).toBe("1763000000000000000");
    expect(span.attributes.get("tokens")).toBe("9007199254740993");
    expect(span.attributes.get("small")).toBe(-7);
    expect(span.attributes.get("nan")).toBeNaN();
    expect(span.attributes.get("blob")).toBe("AAEC");
    expect(span.attributes.get("nested")).toEqual({ a: [true] });
    expect(span.attributes.get("empty")).toBeNull();
  });

  test("base64 ids (the generic protobuf JSON mapping) are rejected: OTLP/JSON ids are hex", () => {
    const body = { resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: hexBytes(TRACE_ID).toString("base64"), spanId: PARENT_ID, startTimeUnixNano: "1" }] }] }] };
    const traces = decodeJson(JSON.stringify(body));
    expect(traces.spanCount).toBe(0);
    expect(traces.rejected[0].reason).toContain("invalid trace id");
  });
});

describe("per-span rejection", () => {
  const good = validSpan();
  const cases: [string, object, string][] = [
    ["15-byte trace id", validSpan({ traceId: hexBytes(TRACE_ID).subarray(1) }), "invalid trace id"],
    ["all-zero trace id", validSpan({ traceId: Buffer.alloc(16) }), "invalid trace id"],
    ["missing span id", validSpan({ spanId: Buffer.alloc(0) }), "invalid span id"],
    ["9-byte span id", validSpan({ spanId: Buffer.alloc(9, 1) }), "invalid span id"],
    ["7-byte parent span id", validSpan({ parentSpanId: Buffer.alloc(7, 1) }), "invalid parent span id"],
    ["no start time", validSpan({ startTimeUnixNano: "0" }), "no start time"],
    ["start beyond DateTime64(9)", validSpan({ startTimeUnixNano: "9223372036854775808" }), "after 2262"],
  ];
  for (const [label, span, reason] of cases) {
    test(`${label}: that span is rejected, the others kept`, () => {
      const body = requestWithSpans([good, span, good]);
      for (const traces of [decodeProtobuf(body), decodeProtobufWithProtobufjs(body)]) {
        expect(traces.spanCount).toBe(2);
        expect(traces.rejected).toHaveLength(1);
        expect(traces.rejected[0].reason).toContain(reason);
        expect(allSpans(traces).map((s) => s.name)).toEqual(["ok", "ok"]);
      }
    });
  }

  test("JSON: short, non-hex and all-zero ids are rejected", () => {
    const span = (traceId: string, spanId: string) => ({ traceId, spanId, startTimeUnixNano: "1763000000000000000" });
    const body = {
      resourceSpans: [
        { scopeSpans: [{ spans: [span(TRACE_ID.slice(2), PARENT_ID), span(`zz${TRACE_ID.slice(2)}`, PARENT_ID), span(TRACE_ID, "0000000000000000"), span(TRACE_ID, PARENT_ID)] }] },
      ],
    };
    const traces = decodeJson(JSON.stringify(body));
    expect(traces.spanCount).toBe(1);
    expect(traces.rejected.map((r) => r.reason.split(" ").slice(0, 3).join(" "))).toEqual(["invalid trace id", "invalid trace id", "invalid span id"]);
  });

  test("an all-zero parent span id means a root span; an end before the start or past 2262 becomes the start", () => {
    const body = requestWithSpans([validSpan({ parentSpanId: Buffer.alloc(8), endTimeUnixNano: "5" }), validSpan({ endTimeUnixNano: "9223372036854775808" })]);
    const [early, late] = allSpans(decodeProtobuf(body));
    expect(early.parentSpanId).toBe("");
    expect(early.endTimeUnixNano).toBe(early.startTimeUnixNano);
    expect(late.endTimeUnixNano).toBe(late.startTimeUnixNano);
  });
});

describe("bodies that are not requests", () => {
  test("garbage protobuf throws DecodeError", () => {
    for (const body of [new Uint8Array([0xff, 0xff, 0xff, 0xff]), new Uint8Array([0x0a, 0x05, 0x01]), new TextEncoder().encode("{\"resourceSpans\": []}")]) {
      expect(() => decodeProtobuf(body)).toThrow(DecodeError);
      expect(() => decodeProtobufWithProtobufjs(body)).toThrow(DecodeError);
    }
  });

  test("a truncated protobuf body throws DecodeError", () => {
    const body = protobufBody();
    for (const cut of [1, 7, Math.floor(body.length / 2), body.length - 1]) expect(() => decodeProtobuf(body.subarray(0, cut))).toThrow(DecodeError);
  });

  test("an empty protobuf body is an empty request", () => {
    expect(decodeProtobuf(new Uint8Array())).toEqual({ resourceSpans: [], spanCount: 0, rejected: [] });
  });

  test("truncated JSON and wrong shapes throw DecodeError", () => {
    const body = jsonBody();
    for (const text of [body.slice(0, -3), "[]", "null", '{"resourceSpans": {}}', '{"resourceSpans": [{"scopeSpans": [{"spans": [42]}]}]}']) {
      expect(() => decodeJson(text)).toThrow(DecodeError);
    }
  });
});

describe("wire decoder against protobufjs on hand-built requests", () => {
  const kvlist = {
    kvlistValue: {
      values: [
        { key: "__proto__", value: { stringValue: "not a prototype" } },
        { key: "list", value: { arrayValue: { values: [{ intValue: -1 }, { doubleValue: 1.5 }, {}] } } },
      ],
    },
  };
  const spans = [
    validSpan({
      kind: 5,
      flags: 0x301,
      traceState: "vendor=1",
      parentSpanId: hexBytes(PARENT_ID),
      attributes: [
        { key: "kv", value: kvlist },
        { key: "bytes", value: { bytesValue: Buffer.from([0, 1, 2, 250]) } },
        { key: "max", value: { intValue: "9223372036854775807" } },
        { key: "min", value: { intValue: "-9223372036854775808" } },
        { key: "minus-2^53", value: { intValue: "-9007199254740992" } },
        { key: "safe", value: { intValue: "-9007199254740991" } },
        { key: "no value" },
        { key: "emoji", value: { stringValue: "🚀 ünïcødé ".repeat(20) } },
      ],
      events: [{ timeUnixNano: "18446744073709551615", name: "far", attributes: [{ key: "x", value: { boolValue: false } }] }],
      links: [{ traceId: hexBytes(LINKED_TRACE_ID), spanId: hexBytes(LINKED_SPAN_ID), traceState: "a=b", flags: 1 }],
      status: { code: 2, message: "boom" },
    }),
    validSpan({ spanId: hexBytes("2222222222222222"), kind: 9, status: { code: 7 } }),
  ];

  test("values, edge integers, unknown enums and prototype keys decode identically", () => {
    const body = requestWithSpans(spans, [{ key: "service.name", value: { stringValue: "svc" } }]);
    const wire = decodeProtobuf(body);
    expect(wire).toEqual(decodeProtobufWithProtobufjs(body));
    const [first, second] = allSpans(wire);
    expect(first.attributes.get("max")).toBe("9223372036854775807");
    expect(first.attributes.get("min")).toBe("-9223372036854775808");
    expect(first.attributes.get("minus-2^53")).toBe("-9007199254740992");
    expect(first.attributes.get("safe")).toBe(-9007199254740991);
    expect(first.attributes.get("bytes")).toBe("AAEC+g==");
    expect(first.attributes.get("no value")).toBeNull();
    const kv = first.attributes.get("kv") as Record<string, unknown>;
    expect(Object.getPrototypeOf(kv)).toBe(Object.prototype);
    expect(Object.getOwnPropertyDescriptor(kv, "__proto__")?.value).toBe("not a prototype");
    expect(kv.list).toEqual([-1, 1.5, null]);
    expect(first.events[0].timeUnixNano).toBe("18446744073709551615");
    expect(first.flags).toBe(0x301);
    expect(second.kind).toBe("unspecified");
    expect(second.statusCode).toBe("unset");
  });

  test("unknown fields are skipped and field order does not matter", () => {
    const body = requestWithSpans(spans);
    // An unknown varint field (99) and an unknown length-delimited field (98) before the real content.
    const unknown = Uint8Array.from([...varint((99 << 3) | 0), ...varint(150), ...varint((98 << 3) | 2), 2, 0xaa, 0xbb]);
    const reordered = new Uint8Array(unknown.length + body.length);
    reordered.set(unknown);
    reordered.set(body, unknown.length);
    expect(decodeProtobuf(reordered)).toEqual(decodeProtobuf(body));
    expect(decodeProtobuf(reordered)).toEqual(decodeProtobufWithProtobufjs(reordered));
  });
});

describe("attribute value nesting", () => {
  const nest = (depth: number): object => (depth === 0 ? { stringValue: "leaf" } : { arrayValue: { values: [nest(depth - 1)] } });
  const jsonBodyWith = (value: object) =>
    JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: TRACE_ID, spanId: PARENT_ID, startTimeUnixNano: "1", attributes: [{ key: "deep", value }] }] }] }] });

  test("32 levels decode; deeper bodies are refused instead of exhausting the stack", () => {
    expect(allSpans(decodeProtobuf(requestWithSpans([validSpan({ attributes: [{ key: "deep", value: nest(32) }] })])))).toHaveLength(1);
    expect(() => decodeProtobuf(requestWithSpans([validSpan({ attributes: [{ key: "deep", value: nest(33) }] })]))).toThrow(DecodeError);
    expect(allSpans(decodeJson(jsonBodyWith(nest(32))))).toHaveLength(1);
    expect(() => decodeJson(jsonBodyWith(nest(33)))).toThrow(DecodeError);
  });
});
