import { beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import type { LatitudeClient } from "@latitude-data/sdk";
import type { Vigil } from "../src/server";
import { insertSpans, newTraceId, spanRow, tenantOf, type Tenant } from "./fixtures/spans";
import { bootstrapAccount, sharedVigil } from "./helpers";
import { sdkFailure } from "./sdk";

setDefaultTimeout(60_000);

let vigil: Vigil;
let client: LatitudeClient;
let project: string;
let tenant: Tenant;
const errored = [newTraceId(), newTraceId()];
const fine = newTraceId();

beforeAll(async () => {
  vigil = await sharedVigil();
  const { account, client: sdk } = await bootstrapAccount(vigil.url);
  client = sdk;
  project = account.projectSlug;
  tenant = await tenantOf(vigil.ctx, account.apiKey, project);
  const now = Date.now() - 60_000;
  await insertSpans(vigil.ctx, [
    ...errored.map((trace_id, i) => spanRow(tenant, { trace_id, startMs: now + i * 1000, status_code: "error", name: "checkout" })),
    spanRow(tenant, { trace_id: fine, startMs: now + 5000, name: "checkout" }),
  ]);
});

describe("saved searches through the official 9.15.0 client", () => {
  test("create, list, get, update (slug rules), traces, delete", async () => {
    const created = await client.savedSearches.create(project, { name: "Failed Checkouts", filters: { status: [{ op: "eq", value: "error" }] } });
    expect(created).toMatchObject({ slug: "failed-checkouts", name: "Failed Checkouts", query: null, deletedAt: null, projectId: tenant.projectId });
    expect(created.filters).toEqual({ status: [{ op: "eq", value: "error" }] });

    const second = await client.savedSearches.create(project, { name: "failed checkouts!", query: "refund" });
    expect(second.slug).not.toBe("failed-checkouts");
    expect(second.slug.startsWith("failed-checkouts-")).toBe(true);

    const list = await client.savedSearches.list(project);
    expect(list.items.map((item) => item.id)).toEqual([created.id, second.id]);
    expect(list).toMatchObject({ nextCursor: null, hasMore: false });
    expect(await client.savedSearches.get(project, created.slug)).toEqual(created);

    const recased = await client.savedSearches.update(project, created.slug, { name: "FAILED checkouts" });
    expect(recased.slug).toBe("failed-checkouts");
    const renamed = await client.savedSearches.update(project, created.slug, { name: "Broken payments" });
    expect(renamed.slug).toBe("broken-payments");
    await sdkFailure(client.savedSearches.get(project, "failed-checkouts")).then((error) => expect(error.statusCode).toBe(404));

    const page = await client.savedSearches.listTraces(project, renamed.slug, { limit: 1 });
    expect(page.items).toHaveLength(1);
    expect(page.hasMore).toBe(true);
    const rest = await client.savedSearches.listTraces(project, renamed.slug, { cursor: page.nextCursor!, limit: 10 });
    expect([...page.items, ...rest.items].map((item) => item.traceId).sort()).toEqual([...errored].sort());

    await client.savedSearches.delete(project, renamed.slug);
    await sdkFailure(client.savedSearches.get(project, renamed.slug)).then((error) => expect(error.statusCode).toBe(404));
    expect((await client.savedSearches.list(project)).items.map((item) => item.id)).toEqual([second.id]);
    // The deleted search's slug is free again.
    expect((await client.savedSearches.create(project, { name: "Broken payments", query: "card" })).slug).toBe("broken-payments");
  });

  test("bad definitions are 400s naming the problem", async () => {
    const empty = await sdkFailure(client.savedSearches.create(project, { name: "nothing" }));
    expect(empty.statusCode).toBe(400);
    expect(empty.body.error).toContain("query or filters");
    const unknown = await sdkFailure(client.savedSearches.create(project, { name: "bad", filters: { nope: [{ op: "eq", value: 1 }] } }));
    expect(unknown.statusCode).toBe(400);
    expect(unknown.body.error).toContain("nope");
    const search = await client.savedSearches.create(project, { name: "clearable", query: "x" });
    const cleared = await sdkFailure(client.savedSearches.update(project, search.slug, { query: null }));
    expect(cleared.statusCode).toBe(400);
  });

  test("another organization sees none of them", async () => {
    const mine = await client.savedSearches.create(project, { name: "private", query: "secret" });
    const { client: other, account } = await bootstrapAccount(vigil.url);
    expect((await other.savedSearches.list(account.projectSlug)).items).toEqual([]);
    expect((await sdkFailure(other.savedSearches.get(account.projectSlug, mine.id))).statusCode).toBe(404);
  });
});
