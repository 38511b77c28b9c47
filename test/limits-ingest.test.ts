import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { createServer, connect, type Server as NetServer } from "node:net";
import { credentials as grpcCredentials, Client as GrpcClient, Metadata, status as grpcStatus, type ServiceError } from "@grpc/grpc-js";
import { DROPPED_ATTRIBUTES_KEY, truncationMarker } from "../src/ingest/span-limits";
import type { Vigil } from "../src/server";
import { newSpanId, newTraceId } from "./fixtures/spans";
import { bootstrapAccount, startTestVigil } from "./helpers";
import { freePort } from "./process";

setDefaultTimeout(60_000);

let vigil: Vigil;
let grpcPort: number;

beforeAll(async () => {
  grpcPort = await freePort();
  vigil = await startTestVigil({
    OTLP_GRPC_PORT: String(grpcPort),
    INGEST_MAX_CONCURRENT_EXPORTS: "4",
    INGEST_BODY_GRACE_MS: "1500",
    INGEST_BODY_MIN_BYTES_PER_SECOND: "2000",
  });
});
afterAll(() => vigil?.stop());

async function account() {
  const { account } = await bootstrapAccount(vigil.url);
  return { apiKey: account.apiKey, slug: account.projectSlug };
}

const nanos = (ms: number) => (BigInt(Math.round(ms)) * 1_000_000n).toString();
type Attribute = { key: string; value: Record<string, unknown> };

function otlpJson(spans: { traceId?: string; spanId?: string; start: string; attributes?: Attribute[] }[]) {
  return JSON.stringify({
    resourceSpans: [
      {
        resource: { attributes: [] },
        scopeSpans: [
          {
            scope: { name: "limits-test" },
            spans: spans.map((span) => ({
              traceId: span.traceId ?? newTraceId(),
              spanId: span.spanId ?? newSpanId(),
              name: "step",
              kind: 1,
              startTimeUnixNano: span.start,
              endTimeUnixNano: span.start,
              attributes: span.attributes ?? [],
            })),
          },
        ],
      },
    ],
  });
}

const exportJson = (owner: { apiKey: string; slug: string }, body: string) =>
  fetch(`${vigil.url}/v1/traces`, {
    method: "POST",
    headers: { authorization: `Bearer ${owner.apiKey}`, "x-latitude-project": owner.slug, "content-type": "application/json" },
    body,
  });

const get = async (owner: { apiKey: string; slug: string }, path: string) =>
  (await fetch(`${vigil.url}/v1/projects/${owner.slug}${path}`, { headers: { authorization: `Bearer ${owner.apiKey}` } })).json();

async function eventually<T>(read: () => Promise<T | undefined>, what: string): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await read();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(100);
  }
}

describe("slow bodies cannot hold ingest", () => {
  test("trickled bodies end with 408 and hold no decode slot: another organization's export succeeds meanwhile", async () => {
    const slow = await account();
    const fast = await account();
    const { port } = new URL(vigil.url);
    // Twice the concurrency limit of slow senders, each announcing 100 kB and sending a byte every 400 ms.
    const answers = Array.from({ length: 8 }, () =>
      new Promise<string>((resolve) => {
        let answer = "";
        const socket = connect(Number(port), "127.0.0.1", () => {
          socket.write(
            `POST /v1/traces HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${slow.apiKey}\r\nX-Latitude-Project: ${slow.slug}\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{`,
          );
          const trickle = setInterval(() => socket.write(" "), 400);
          const done = () => {
            clearInterval(trickle);
            socket.destroy();
            resolve(answer);
          };
          socket.on("data", (data: Buffer) => {
            answer += data.toString("utf8");
            if (answer.includes("\r\n\r\n")) done();
          });
          socket.on("close", done);
          socket.on("error", () => {});
        });
      }),
    );
    await Bun.sleep(300);
    const started = performance.now();
    const response = await exportJson(fast, otlpJson([{ start: nanos(Date.now()) }]));
    expect({ status: response.status, body: await response.json() }).toEqual({ status: 200, body: {} });
    const fastMs = performance.now() - started;

    const statuses = (await Promise.all(answers)).map((answer) => Number(answer.split(" ")[1]));
    // An organization reads at most INGEST_MAX_CONCURRENT_EXPORTS bodies at once: the others were told to retry at once.
    expect(statuses.filter((status) => status === 408)).toHaveLength(4);
    expect(statuses.filter((status) => status === 503)).toHaveLength(4);
    // The fast export did not wait for the slow bodies' deadline.
    expect(fastMs).toBeLessThan(1500);
  });
});

describe("gRPC", () => {
  const client = () => new GrpcClient(`127.0.0.1:${proxyPort}`, grpcCredentials.createInsecure(), { "grpc.max_send_message_length": -1 });
  let proxy: NetServer;
  let proxyPort: number;
  let bytesToServer = 0;

  beforeAll(async () => {
    // Counts the bytes the client manages to send to Vigil's gRPC port.
    proxy = createServer((downstream) => {
      const upstream = connect(grpcPort, "127.0.0.1");
      downstream.on("data", (data: Buffer) => {
        bytesToServer += data.byteLength;
        upstream.write(data);
      });
      upstream.on("data", (data) => downstream.write(data));
      const close = () => {
        downstream.destroy();
        upstream.destroy();
      };
      downstream.on("close", close).on("error", close);
      upstream.on("close", close).on("error", close);
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    proxyPort = (proxy.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((resolve) => proxy.close(() => resolve())));

  const call = (metadata: Metadata, message: Buffer) =>
    new Promise<ServiceError | null>((resolve) => {
      const grpc = client();
      grpc.makeUnaryRequest(
        "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
        (value: Buffer) => value,
        (value: Buffer) => value,
        message,
        metadata,
        (error) => {
          grpc.close();
          resolve(error);
        },
      );
    });

  test("an unauthenticated call is refused before its message is received", async () => {
    bytesToServer = 0;
    const message = Buffer.alloc(60 << 20);
    const calls = await Promise.all(Array.from({ length: 4 }, () => call(new Metadata(), message)));
    expect(calls.map((error) => error?.code)).toEqual(Array(4).fill(grpcStatus.UNAUTHENTICATED));
    // 4 × 60 MiB were offered; HTTP/2 flow control lets through a window, not the messages.
    expect(bytesToServer).toBeLessThan(16 << 20);
  });

  test("a message over INGEST_MAX_BODY_BYTES is RESOURCE_EXHAUSTED", async () => {
    const owner = await account();
    const metadata = new Metadata();
    metadata.set("authorization", `Bearer ${owner.apiKey}`);
    const error = await call(metadata, Buffer.alloc(vigil.ctx.config.ingest.maxBodyBytes + 1024));
    expect(error?.code).toBe(grpcStatus.RESOURCE_EXHAUSTED);
  });
});

describe("spans that will not be kept are not acknowledged as kept", () => {
  test("outside the accepted window: refused in the partial success, naming why; the rest kept", async () => {
    const owner = await account();
    const now = Date.now();
    const kept = newTraceId();
    const longLived = newTraceId();
    const outside = ["1", nanos(Date.UTC(1970, 0, 2)), nanos(Date.UTC(2106, 1, 8)), "9223372036854775807", nanos(Date.UTC(2200, 0, 1)), nanos(now - 91 * 86_400_000), nanos(now + 2 * 86_400_000)];
    const body = otlpJson([
      ...outside.map((start) => ({ start })),
      { traceId: kept, start: nanos(now - 60_000) },
      // Retention of 65535 days: its deadline lies past 2106, which once wrapped around to 1970.
      { traceId: longLived, start: nanos(now - 30_000), attributes: [{ key: "latitude.retention_days", value: { intValue: "65535" } }] },
    ]);
    const response = await exportJson(owner, body);
    expect(response.status).toBe(200);
    const { partialSuccess } = (await response.json()) as { partialSuccess: { rejectedSpans: number; errorMessage: string } };
    expect(partialSuccess.rejectedSpans).toBe(outside.length);
    expect(partialSuccess.errorMessage).toMatch(/starts more than 90 days ago \(the retention\); not stored/);
    expect(partialSuccess.errorMessage).toMatch(/starts more than 86400 s in the future; not stored/);

    const listed = await eventually(async () => {
      const page = (await (
        await fetch(`${vigil.url}/v1/projects/${owner.slug}/traces/list`, {
          method: "POST",
          headers: { authorization: `Bearer ${owner.apiKey}`, "content-type": "application/json" },
          body: "{}",
        })
      ).json()) as { items: { traceId: string }[] };
      return page.items.length >= 2 ? page.items.map((item) => item.traceId).sort() : undefined;
    }, "the kept spans");
    expect(listed).toEqual([kept, longLived].sort());

    // Merging applies the TTL: the long-lived span's deadline must not have wrapped into the past.
    await vigil.ctx.ch.client.command({ query: `OPTIMIZE TABLE ${vigil.ctx.ch.database}.spans FINAL` });
    const [{ count }] = await vigil.ctx.ch.read<{ count: number }>(
      "test",
      `SELECT count() AS count FROM ${vigil.ctx.ch.database}.spans WHERE trace_id IN {ids:Array(String)}`,
      { ids: [kept, longLived] },
    );
    expect(count).toBe(2);
  });

  test("a request of only such spans is a partial success, not a 400 the sender would retry or drop silently", async () => {
    const owner = await account();
    const response = await exportJson(owner, otlpJson([{ start: "1" }]));
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ partialSuccess: { rejectedSpans: 1, errorMessage: expect.stringMatching(/not stored/) } });
  });
});

describe("span attribute limits", () => {
  test("a value over INGEST_MAX_ATTRIBUTE_VALUE_BYTES is cut with a marker; attributes past the count are dropped and counted", async () => {
    const owner = await account();
    const { maxAttributeValueBytes, maxAttributesPerSpan } = vigil.ctx.config.ingest;
    const traceId = newTraceId();
    const spanId = newSpanId();
    const huge = "é".repeat(maxAttributeValueBytes); // 2 bytes each
    const many = Array.from({ length: maxAttributesPerSpan + 500 }, (_, i) => ({ key: `k${String(i).padStart(5, "0")}`, value: { stringValue: "v" } }));
    const response = await exportJson(owner, otlpJson([{ traceId, spanId, start: nanos(Date.now()), attributes: [{ key: "huge", value: { stringValue: huge } }, ...many] }]));
    expect(response.status).toBe(200);
    const span = await eventually(async () => {
      const detail = (await get(owner, `/traces/${traceId}/spans/${spanId}`)) as { attrString?: Record<string, string>; attrInt?: Record<string, number> };
      return detail.attrString ? detail : undefined;
    }, "the span");
    expect(span.attrString!.huge).toBe(`${"é".repeat(maxAttributeValueBytes / 2)}${truncationMarker(maxAttributeValueBytes)}`);
    const kept = Object.keys(span.attrString!).filter((key) => /^k\d+$/.test(key));
    expect(kept).toHaveLength(maxAttributesPerSpan - 1);
    expect(span.attrInt![DROPPED_ATTRIBUTES_KEY]).toBe(501);
  });
});
