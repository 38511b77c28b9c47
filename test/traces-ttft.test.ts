// A trace's time to first token: from the trace's start to the first token of its earliest completion that
// measured one, min(span start + span TTFT) - trace start; 0 only when no completion measured it. The list, the
// `ttft` filter, `gtePercentile` and the analytics median follow it.
import { beforeAll, expect, setDefaultTimeout, test } from "bun:test";
import { randomBytes } from "node:crypto";
import type { LatitudeClient } from "@latitude-data/sdk";
import { bootstrapAccount, sharedVigil } from "./helpers";

setDefaultTimeout(60_000);

const start = BigInt(Date.now() - 3_600_000) * 1_000_000n;
const ms = (value: number) => String(start + BigInt(value) * 1_000_000n);
const attribute = (key: string, value: string | number) =>
  typeof value === "number" ? { key, value: { doubleValue: value } } : { key, value: { stringValue: value } };

interface SentSpan {
  name: string;
  atMs: number;
  chat?: boolean;
  ttftSeconds?: number;
}

function traceOf(spans: SentSpan[]) {
  const traceId = randomBytes(16).toString("hex");
  const rootId = randomBytes(8).toString("hex");
  return {
    traceId,
    spans: spans.map((span, index) => ({
      traceId,
      spanId: index === 0 ? rootId : randomBytes(8).toString("hex"),
      parentSpanId: index === 0 ? "" : rootId,
      name: span.name,
      kind: 1,
      startTimeUnixNano: ms(span.atMs),
      endTimeUnixNano: ms(span.atMs + 2_000),
      attributes: [
        ...(span.chat ? [attribute("gen_ai.operation.name", "chat"), attribute("gen_ai.request.model", "gpt-4o")] : []),
        ...(span.ttftSeconds === undefined ? [] : [attribute("gen_ai.server.time_to_first_token", span.ttftSeconds)]),
      ],
    })),
  };
}

// The first call measured nothing, a later streamed one did: 1 s after the start + 0.5 s.
const laterStream = traceOf([{ name: "later stream", atMs: 0 }, { name: "chat", atMs: 100, chat: true }, { name: "chat streamed", atMs: 1_000, chat: true, ttftSeconds: 0.5 }]);
// Two measured completions: the earliest first token wins, not the first completion's.
const earliestToken = traceOf([{ name: "earliest token", atMs: 0 }, { name: "slow chat", atMs: 0, chat: true, ttftSeconds: 0.9 }, { name: "quick chat", atMs: 200, chat: true, ttftSeconds: 0.2 }]);
const unmeasured = traceOf([{ name: "unmeasured", atMs: 0 }, { name: "chat", atMs: 50, chat: true }]);

let client: LatitudeClient;
let slug = "";

beforeAll(async () => {
  const vigil = await sharedVigil();
  const { account, client: accountClient } = await bootstrapAccount(vigil.url, { projectName: "Ttft" });
  client = accountClient;
  slug = account.projectSlug;
  const body = JSON.stringify({ resourceSpans: [{ resource: { attributes: [] }, scopeSpans: [{ scope: { name: "ttft" }, spans: [laterStream, earliestToken, unmeasured].flatMap((trace) => trace.spans) }] }] });
  const response = await fetch(`${vigil.url}/v1/traces`, { method: "POST", body, headers: { "content-type": "application/json", authorization: `Bearer ${account.apiKey}`, "x-latitude-project": slug } });
  expect(response.status).toBe(200);
  await vigil.ctx.spanWriter.flush();
}, 180_000);

const names = async (filters: Record<string, unknown>) =>
  (await client.traces.list(slug, { filters } as never)).items.map((trace) => trace.rootSpanName).sort();

test("the list, the detail, the ttft filter and gtePercentile follow the trace's first token", async () => {
  const listed = Object.fromEntries((await client.traces.list(slug, {} as never)).items.map((trace) => [trace.rootSpanName, trace.timeToFirstTokenNs]));
  expect(listed).toEqual({ "later stream": 1_500_000_000, "earliest token": 400_000_000, unmeasured: 0 });
  expect((await client.traces.get(slug, laterStream.traceId)).timeToFirstTokenNs).toBe(1_500_000_000);
  expect(await names({ ttft: [{ op: "gte", value: 1_000_000_000 }] })).toEqual(["later stream"]);
  expect(await names({ ttft: [{ op: "eq", value: 0 }] })).toEqual(["unmeasured"]);
  expect(await names({ ttft: [{ op: "gtePercentile", value: 90 }] })).toEqual(["later stream"]);
});

test("the analytics median is over the traces' times to first token", async () => {
  const analytics = await client.traces.analytics(slug, {} as never);
  // 1.5 s and 0.4 s (the unmeasured trace has none): the exact median of two values is the upper one.
  expect(analytics.timeToFirstToken.median).toBe(1.5);
});
