import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { HttpError } from "../src/lib/errors";
import type { Vigil } from "../src/server";
import { largestFilterSet } from "./fixtures/filters";
import { insertSpans, newTraceId, spanRow, tenantOf } from "./fixtures/spans";
import { bootstrapAccount, startTestVigil } from "./helpers";

setDefaultTimeout(60_000);

let vigil: Vigil;
let limited: Vigil;
afterAll(async () => {
  await vigil?.stop();
  await limited?.stop();
});
beforeAll(async () => {
  vigil = await startTestVigil();
  limited = await startTestVigil({ READ_TIMEOUT_SECONDS: "2", READ_MAX_MEMORY_BYTES: String(64 << 20) });
});

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function account(on = vigil) {
  const { account } = await bootstrapAccount(on.url);
  const tenant = await tenantOf(on.ctx, account.apiKey, account.projectSlug);
  const list = async (body: unknown) => {
    const started = performance.now();
    const response = await fetch(`${on.url}/v1/projects/${account.projectSlug}/traces/list`, {
      method: "POST",
      headers: { authorization: `Bearer ${account.apiKey}`, "content-type": "application/json" },
      body: JSON.stringify(body),
    });
    await response.arrayBuffer();
    return { status: response.status, ms: performance.now() - started };
  };
  return { tenant, list };
}

async function refusal(read: Promise<unknown>): Promise<HttpError> {
  const error = await read.then(
    () => null,
    (error: unknown) => error,
  );
  expect(error).toBeInstanceOf(HttpError);
  return error as HttpError;
}

describe("every ClickHouse read runs with a time and a memory limit", () => {
  test("a read past READ_TIMEOUT_SECONDS is a 503 with Retry-After; none of its rows reach the next read", async () => {
    const slowOrganization = await account(limited);
    const nextOrganization = await account(limited);
    // Rows stream out before the limit hits: the embedded engine would hand them to the next statement.
    const slow = await refusal(limited.ctx.ch.read(slowOrganization.tenant.organizationId, "SELECT sleepEachRow(0.25) AS secret FROM numbers(40) SETTINGS max_block_size = 1"));
    expect({ status: slow.status, retryAfter: slow.headers["Retry-After"] }).toEqual({ status: 503, retryAfter: "5" });
    expect(slow.message).toMatch(/longer than 2 s/);
    expect(await limited.ctx.ch.read(nextOrganization.tenant.organizationId, "SELECT 1 AS one")).toEqual([{ one: 1 }]);
  });

  test("a read past READ_MAX_MEMORY_BYTES is a 400 naming the limit", async () => {
    const { tenant } = await account(limited);
    const greedy = await refusal(limited.ctx.ch.read(tenant.organizationId, "SELECT length(repeat('x', 200000000)) AS n"));
    expect(greedy.status).toBe(400);
    expect(greedy.message).toMatch(new RegExp(`more than ${64 << 20} bytes`));
  });

  test("an organization's reads beyond its share wait, and past the queue are refused with 429 + Retry-After; other organizations are not", async () => {
    const busy = await account();
    const other = await account();
    const sleeping = () => vigil.ctx.ch.read(busy.tenant.organizationId, "SELECT sleepEachRow(0.05) FROM numbers(4) SETTINGS max_block_size = 1");
    // 1 runs (the embedded engine's share), 16 wait, the rest are refused at once.
    const outcomes = await Promise.allSettled([...Array.from({ length: 23 }, sleeping), vigil.ctx.ch.read(other.tenant.organizationId, "SELECT 1 AS one")]);
    const refused = outcomes.filter((outcome) => outcome.status === "rejected").map((outcome) => (outcome as PromiseRejectedResult).reason as HttpError);
    expect(refused.map((error) => [error.status, error.headers["Retry-After"]])).toEqual(Array.from({ length: 6 }, () => [429, "1"]));
    expect(outcomes.at(-1)).toEqual({ status: "fulfilled", value: [{ one: 1 }] });
  });
});

describe("fairness", () => {
  test("another organization's simple list waits for about one heavy read at most while one organization sends its heaviest lists", async () => {
    const heavy = await account();
    const light = await account();
    const now = Date.now();
    const traces = Array.from({ length: 200 }, () => newTraceId());
    await insertSpans(
      vigil.ctx,
      traces.flatMap((trace_id, i) =>
        Array.from({ length: 5 }, (_, j) =>
          spanRow(heavy.tenant, { trace_id, startMs: now - 3600_000 + i * 1000 + j, metadata: Object.fromEntries(Array.from({ length: 32 }, (_, k) => [`key-${k}`, `value-${(i + k) % 7}`])) }),
        ),
      ),
    );
    await insertSpans(vigil.ctx, [spanRow(light.tenant, { trace_id: newTraceId(), startMs: now - 60_000 })]);

    const samples = async () => {
      const times: number[] = [];
      for (let i = 0; i < 5; i++) {
        const { status, ms } = await light.list({ limit: 50 });
        expect(status).toBe(200);
        times.push(ms);
      }
      return median(times);
    };
    await light.list({});
    const idle = await samples();
    // One heavy list alone: on chdb reads run one after another, so a fair queue makes the light list wait
    // for at most the one heavy read in flight; an unfair one, for every heavy read queued before it.
    const heavyAlone: number[] = [];
    for (let i = 0; i < 3; i++) heavyAlone.push((await heavy.list({ filters: largestFilterSet(), limit: 200 })).ms);
    const heavyRead = median(heavyAlone);

    // Four clients of one organization, each sending the largest filter set allowed as fast as answered.
    let stop = false;
    const heavyStatuses: number[] = [];
    const heavyClients = Array.from({ length: 4 }, async () => {
      while (!stop) heavyStatuses.push(await heavy.list({ filters: largestFilterSet(), limit: 200 }).then(({ status }) => status, () => 0));
    });
    await Bun.sleep(1000);
    const loaded = await samples().finally(() => (stop = true));
    await Promise.all(heavyClients);

    // The heavy organization was served too (queued within its share, or told to retry), never a 5xx.
    expect(heavyStatuses.length).toBeGreaterThan(0);
    expect(heavyStatuses.every((status) => status === 200 || status === 429)).toBe(true);
    console.log(`fairness: idle ${idle.toFixed(0)} ms, one heavy read ${heavyRead.toFixed(0)} ms, while heavy ${loaded.toFixed(0)} ms`);
    // Four heavy clients keep the organization's queue full: waiting behind all of them would take 4 heavy reads.
    expect(loaded).toBeLessThan(idle + 2 * heavyRead);
  }, 150_000);
});
