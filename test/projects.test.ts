import { describe, expect, setDefaultTimeout, test } from "bun:test";
import type { Latitude, LatitudeClient } from "@latitude-data/sdk";
import { findProject, getOrganizationRedaction, setOrganizationRedaction } from "../src/modules/projects/service";
import { bootstrapAccount, sharedVigil } from "./helpers";
import { sdkFailure } from "./sdk";

setDefaultTimeout(60_000);

const projectFields = ["id", "organizationId", "name", "slug", "settings", "flaggers", "firstTraceAt", "deletedAt", "lastEditedAt", "createdAt", "updatedAt"];
const isoTimestamp = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

async function account() {
  const { url } = await sharedVigil();
  const { account, client } = await bootstrapAccount(url);
  const { organization } = await client.account.get();
  return { url, apiKey: account.apiKey, client, organizationId: organization.id, defaultProjectSlug: account.projectSlug };
}

async function patch(url: string, apiKey: string, slug: string, body: unknown) {
  const res = await fetch(`${url}/v1/projects/${slug}`, {
    method: "PATCH",
    headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: (await res.json()) as { error: string } };
}

async function listAll(client: LatitudeClient, limit: number) {
  const pages: Latitude.Project[][] = [];
  let cursor: string | undefined;
  for (;;) {
    const page = await client.projects.list({ queryParams: { limit, ...(cursor ? { cursor } : {}) } });
    pages.push(page.items);
    expect(page.hasMore).toBe(page.nextCursor !== null);
    if (!page.nextCursor) return pages;
    cursor = page.nextCursor;
  }
}

describe("projects", () => {
  test("create answers 201 with every field of a Project", async () => {
    const { url, apiKey, organizationId } = await account();
    const res = await fetch(`${url}/v1/projects`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "Checkout Agent" }),
    });
    expect(res.status).toBe(201);
    const project = (await res.json()) as Latitude.Project & { flaggers: Record<string, boolean> };
    expect(Object.keys(project).sort()).toEqual([...projectFields].sort());
    expect(project.id).toMatch(/^[a-z][a-z0-9]{23}$/);
    expect(project).toMatchObject({ organizationId, name: "Checkout Agent", slug: "checkout-agent", settings: null, firstTraceAt: null, deletedAt: null });
    for (const field of ["lastEditedAt", "createdAt", "updatedAt"] as const) expect(project[field]).toMatch(isoTimestamp);
    expect(Object.values(project.flaggers)).toHaveLength(14);
    expect(Object.values(project.flaggers).every((enabled) => enabled === true)).toBe(true);
  });

  test("get by slug, and by id or slug on the organization path", async () => {
    const { client, url, apiKey, organizationId } = await account();
    const created = await client.projects.create({ name: "Support Bot" });
    expect(await client.projects.get(created.slug)).toEqual(created);
    for (const ref of [created.id, created.slug]) {
      const res = await fetch(`${url}/v1/organizations/${organizationId}/projects/${ref}`, { headers: { authorization: `Bearer ${apiKey}` } });
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual(created);
    }
  });

  test("names are unique per organization, case-insensitively, among active projects", async () => {
    const { client } = await account();
    const first = await client.projects.create({ name: "Billing" });
    const duplicate = await sdkFailure(client.projects.create({ name: "billing" }));
    expect(duplicate.statusCode).toBe(409);
    expect(duplicate.body.error).toContain("billing");

    const other = await client.projects.create({ name: "Refunds" });
    const rename = await sdkFailure(client.projects.update(other.slug, { name: "BILLING" }));
    expect(rename.statusCode).toBe(409);

    await client.projects.delete(first.slug);
    const again = await client.projects.create({ name: "Billing" });
    expect(again.id).not.toBe(first.id);
    expect(again.slug).toBe("billing");

    // Another organization may use the same name.
    const { client: stranger } = await account();
    expect((await stranger.projects.create({ name: "Billing" })).slug).toBe("billing");
  });

  test("names that slugify alike get distinct slugs", async () => {
    const { client } = await account();
    const a = await client.projects.create({ name: "Data Pipeline" });
    const b = await client.projects.create({ name: "data-pipeline" });
    expect(a.slug).toBe("data-pipeline");
    expect(b.slug).toMatch(/^data-pipeline-[a-z0-9]{6}$/);
  });

  test("create validates the name", async () => {
    const { client } = await account();
    for (const name of ["", "   "]) {
      const error = await sdkFailure(client.projects.create({ name }));
      expect(error.statusCode).toBe(400);
      expect(error.body.error).toStartWith("name:");
    }
    // PostgreSQL cannot store a NUL character: the caller's 400, not a 500.
    const nul = await sdkFailure(client.projects.create({ name: "bad\u0000name" }));
    expect(nul.statusCode).toBe(400);
    expect(nul.body.error).toContain("NUL");
  });

  test("rename keeps the slug and moves lastEditedAt", async () => {
    const { client } = await account();
    const created = await client.projects.create({ name: "Old Name" });
    await Bun.sleep(5);
    const renamed = await client.projects.update(created.slug, { name: "New Name" });
    expect(renamed.name).toBe("New Name");
    expect(renamed.slug).toBe("old-name");
    expect(renamed.lastEditedAt > created.lastEditedAt).toBe(true);
    expect(renamed.updatedAt > created.updatedAt).toBe(true);
    expect((await client.projects.get("old-name")).name).toBe("New Name");
  });

  test("settings patch changes only the fields sent and merges nested objects", async () => {
    const { client } = await account();
    const { slug } = await client.projects.create({ name: "Settings" });
    await client.projects.update(slug, {
      settings: {
        keepMonitoring: false,
        redaction: { mode: "enforce", entities: ["email", "phone"], scopes: { metadata: true }, identities: "pseudonymize" },
        notifications: { incidents: { "signal.escalating": false }, destinations: { quarantine: false } },
        escalation: { sensitivity: 2 },
      },
    });

    const modeOnly = await client.projects.update(slug, { settings: { redaction: { mode: "off" } } });
    expect(modeOnly.settings).toEqual({
      keepMonitoring: false,
      redaction: { mode: "off", entities: ["email", "phone"], scopes: { metadata: true }, identities: "pseudonymize" },
      notifications: { incidents: { "signal.escalating": false }, destinations: { quarantine: false } },
      escalation: { sensitivity: 2 },
    });

    const nested = await client.projects.update(slug, {
      settings: { notifications: { incidents: { "monitor.match": false } }, redaction: { entities: ["iban"] } },
    });
    expect(nested.settings?.notifications).toEqual({ incidents: { "signal.escalating": false, "monitor.match": false }, destinations: { quarantine: false } });
    expect(nested.settings?.redaction).toEqual({ mode: "off", entities: ["iban"], scopes: { metadata: true }, identities: "pseudonymize" });
    expect(await client.projects.get(slug)).toEqual(nested);
  });

  test("flaggers patch switches only the slugs sent and is not a name/settings edit", async () => {
    const { client } = await account();
    const created = await client.projects.create({ name: "Flaggers" });
    await Bun.sleep(5);
    const first = (await client.projects.update(created.slug, { flaggers: { nsfw: false, "pii-leakage": false } })) as Latitude.Project & {
      flaggers: Record<string, boolean>;
    };
    expect(first.flaggers.nsfw).toBe(false);
    expect(first.flaggers["pii-leakage"]).toBe(false);
    expect(first.flaggers.refusal).toBe(true);
    expect(first.lastEditedAt).toBe(created.lastEditedAt);
    expect(first.updatedAt > created.updatedAt).toBe(true);
    expect(first.settings).toBeNull();

    const second = (await client.projects.update(created.slug, { flaggers: { nsfw: true } })) as typeof first;
    expect(second.flaggers.nsfw).toBe(true);
    expect(second.flaggers["pii-leakage"]).toBe(false);
  });

  test("invalid settings are rejected with the field named, and nothing changes", async () => {
    const { url, apiKey, client } = await account();
    const { slug } = await client.projects.create({ name: "Validation" });
    const cases: [unknown, string][] = [
      [{ settings: { redaction: { entities: ["email", "phone", "credit_card", "iban", "us_ssn", "ip_address", "secret", "email"] } } }, "settings.redaction.entities: must have at most 7 items"],
      [{ settings: { redaction: { entities: ["passport"] } } }, "settings.redaction.entities.0: must be one of:"],
      [{ settings: { escalation: { sensitivity: 7 } } }, "settings.escalation.sensitivity: must be an integer from 1 to 6"],
      [{ settings: { escalation: { sensitivity: 0 } } }, "settings.escalation.sensitivity: must be an integer from 1 to 6"],
      [{ settings: { escalation: { sensitivity: 2.5 } } }, "settings.escalation.sensitivity: must be an integer"],
      [{ flaggers: { "not-a-flagger": true } }, "flaggers.not-a-flagger: is not a known field"],
      [{ flaggers: { nsfw: "yes" } }, "flaggers.nsfw:"],
      [{ settings: { redaction: { mode: "strict" } } }, "settings.redaction.mode: must be one of: off, enforce"],
      [{ settings: { redaction: { identities: "hash" } } }, "settings.redaction.identities: must be one of: keep, pseudonymize"],
      [{ settings: { colour: "blue" } }, "settings.colour: is not a known field"],
      [{ settings: { redaction: { scopes: { metadata: true, tags: true } } } }, "settings.redaction.scopes.tags: is not a known field"],
      [{ settings: { notifications: { incidents: { "monitor.unknown": true } } } }, "settings.notifications.incidents.monitor.unknown: is not a known field"],
      [{ settings: { keepMonitoring: "yes" } }, "settings.keepMonitoring:"],
      [{ name: "" }, "name:"],
    ];
    for (const [body, message] of cases) {
      const res = await patch(url, apiKey, slug, body);
      expect({ body, status: res.status }).toEqual({ body, status: 400 });
      expect(res.body.error).toStartWith(message);
    }
    expect((await client.projects.get(slug)).settings).toBeNull();
  });

  test("list pages never repeat or skip a project, also while projects are added", async () => {
    const { client } = await account();
    for (let i = 1; i <= 6; i++) await client.projects.create({ name: `Paged ${i}` });
    const all = (await listAll(client, 200)).flat();
    expect(all).toHaveLength(7);

    const pages = await listAll(client, 3);
    expect(pages.map((page) => page.length)).toEqual([3, 3, 1]);
    expect(pages.flat().map((project) => project.id)).toEqual(all.map((project) => project.id));

    const first = await client.projects.list({ queryParams: { limit: 2 } });
    await client.projects.create({ name: "Added While Paging" });
    const seen = first.items.map((project) => project.id);
    let cursor = first.nextCursor;
    while (cursor) {
      const page = await client.projects.list({ queryParams: { limit: 2, cursor } });
      seen.push(...page.items.map((project) => project.id));
      cursor = page.nextCursor;
    }
    expect(new Set(seen).size).toBe(seen.length);
    expect(seen).toHaveLength(8);
  });

  test("list validates limit and cursor", async () => {
    const { client } = await account();
    for (const limit of [0, 201]) {
      const error = await sdkFailure(client.projects.list({ queryParams: { limit } }));
      expect(error.statusCode).toBe(400);
      expect(error.body.error).toBe("limit: must be an integer from 1 to 200");
    }
    const forged = Buffer.from(JSON.stringify(["yesterday", "x"])).toString("base64url");
    for (const cursor of ["not-a-cursor", forged]) {
      const error = await sdkFailure(client.projects.list({ queryParams: { cursor } }));
      expect(error.statusCode).toBe(400);
      expect(error.body.error).toStartWith("cursor:");
    }
    const page = await client.projects.list({ queryParams: { limit: 200 } });
    expect(page).toMatchObject({ hasMore: false, nextCursor: null });
  });

  test("delete is soft: the project leaves list and get, the row stays", async () => {
    const { client, url, apiKey, organizationId } = await account();
    const created = await client.projects.create({ name: "Short Lived" });
    const res = await fetch(`${url}/v1/organizations/${organizationId}/projects/${created.id}`, {
      method: "DELETE",
      headers: { authorization: `Bearer ${apiKey}` },
    });
    expect(res.status).toBe(204);
    expect((await sdkFailure(client.projects.get(created.slug))).statusCode).toBe(404);
    expect((await sdkFailure(client.projects.delete(created.slug))).statusCode).toBe(404);
    expect((await sdkFailure(client.projects.update(created.slug, { name: "Back" }))).statusCode).toBe(404);
    const listed = (await listAll(client, 200)).flat();
    expect(listed.some((project) => project.id === created.id)).toBe(false);
    const { ctx } = await sharedVigil();
    const [row] = await ctx.sql<{ deleted_at: Date | null }[]>`SELECT deleted_at FROM projects WHERE id = ${created.id}`;
    expect(row?.deleted_at).toBeInstanceOf(Date);
  });

  test("another organization's projects are 404 in both path forms", async () => {
    const owner = await account();
    const stranger = await account();
    const project = await owner.client.projects.create({ name: "Private" });
    const headers = { authorization: `Bearer ${stranger.apiKey}`, "content-type": "application/json" };

    for (const call of [
      () => stranger.client.projects.get(project.slug),
      () => stranger.client.projects.update(project.slug, { name: "Mine" }),
      () => stranger.client.projects.delete(project.slug),
    ]) {
      expect((await sdkFailure(call())).statusCode).toBe(404);
    }
    // The stranger's own path with the owner's project id.
    const ownPath = await fetch(`${stranger.url}/v1/organizations/${stranger.organizationId}/projects/${project.id}`, { headers });
    expect(ownPath.status).toBe(404);
    // The owner's organization id in the path, with the stranger's credential.
    for (const [method, path, body] of [
      ["GET", `/v1/organizations/${owner.organizationId}/projects`, undefined],
      ["POST", `/v1/organizations/${owner.organizationId}/projects`, { name: "Intruder" }],
      ["GET", `/v1/organizations/${owner.organizationId}/projects/${project.id}`, undefined],
      ["PATCH", `/v1/organizations/${owner.organizationId}/projects/${project.id}`, { name: "Mine" }],
      ["DELETE", `/v1/organizations/${owner.organizationId}/projects/${project.id}`, undefined],
    ] as const) {
      const res = await fetch(stranger.url + path, { method, headers, body: body && JSON.stringify(body) });
      expect({ method, path, status: res.status }).toEqual({ method, path, status: 404 });
      expect(((await res.json()) as { error: string }).error).toBe("Organization not found");
    }
    expect(await owner.client.projects.get(project.slug)).toEqual(project);
    expect((await listAll(owner.client, 200)).flat().map((p) => p.name)).not.toContain("Intruder");
  });

  test("the organization path form creates and lists", async () => {
    const { url, apiKey, organizationId } = await account();
    const headers = { authorization: `Bearer ${apiKey}`, "content-type": "application/json" };
    const created = await fetch(`${url}/v1/organizations/${organizationId}/projects`, { method: "POST", headers, body: JSON.stringify({ name: "Org Path" }) });
    expect(created.status).toBe(201);
    const project = (await created.json()) as Latitude.Project;
    const listed = await fetch(`${url}/v1/organizations/${organizationId}/projects?limit=1`, { headers });
    const page = (await listed.json()) as Latitude.PaginatedProjects;
    expect(page.items).toHaveLength(1);
    expect(page.hasMore).toBe(true);
    const updated = await fetch(`${url}/v1/organizations/${organizationId}/projects/${project.slug}`, {
      method: "PATCH",
      headers,
      body: JSON.stringify({ settings: { escalation: { sensitivity: 5 } } }),
    });
    expect(((await updated.json()) as Latitude.Project).settings).toEqual({ escalation: { sensitivity: 5 } });
  });

  test("findProject resolves an id or a slug within the organization only", async () => {
    const { ctx } = await sharedVigil();
    const owner = await account();
    const stranger = await account();
    const project = await owner.client.projects.create({ name: "Lookup" });
    expect((await findProject(ctx.sql, owner.organizationId, project.id)).slug).toBe("lookup");
    expect((await findProject(ctx.sql, owner.organizationId, "lookup")).id).toBe(project.id);
    await expect(findProject(ctx.sql, stranger.organizationId, project.id)).rejects.toMatchObject({ status: 404 });
    await owner.client.projects.delete(project.slug);
    await expect(findProject(ctx.sql, owner.organizationId, project.id)).rejects.toMatchObject({ status: 404 });
  });

  test("organization redaction policy is stored per organization", async () => {
    const { ctx } = await sharedVigil();
    const owner = await account();
    const other = await account();
    expect(await getOrganizationRedaction(ctx.sql, owner.organizationId)).toEqual({ policy: null, locked: false });
    const policy = { mode: "enforce" as const, entities: ["email" as const, "secret" as const] };
    expect(await setOrganizationRedaction(ctx.sql, owner.organizationId, { policy, locked: true })).toEqual({ policy, locked: true });
    expect(await getOrganizationRedaction(ctx.sql, owner.organizationId)).toEqual({ policy, locked: true });
    expect(await getOrganizationRedaction(ctx.sql, other.organizationId)).toEqual({ policy: null, locked: false });
    expect(await setOrganizationRedaction(ctx.sql, owner.organizationId, { policy: null, locked: false })).toEqual({ policy: null, locked: false });
    await expect(getOrganizationRedaction(ctx.sql, "nosuchorganizationid0000")).rejects.toMatchObject({ status: 404 });
  });
});
