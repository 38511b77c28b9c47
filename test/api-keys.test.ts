import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { bootstrapAccount, sharedVigil, startTestVigil } from "./helpers";
import { sdkClient, sdkFailure } from "./sdk";

setDefaultTimeout(60_000);

async function account() {
  const { url } = await sharedVigil();
  const { account, client } = await bootstrapAccount(url);
  return { url, apiKey: account.apiKey, client };
}

describe("api keys", () => {
  test("list shows keys masked, never their token", async () => {
    const { client, apiKey } = await account();
    const res = await client.apiKeys.list().withRawResponse();
    expect(res.data.apiKeys).toHaveLength(1);
    const [key] = res.data.apiKeys;
    expect(key).toMatchObject({ name: "Bootstrap key", deletedAt: null });
    expect(key!.token).toBe(`${apiKey.slice(0, 12)}…`);
    expect(JSON.stringify(res.data)).not.toContain(apiKey.slice(12, 24));
    // The last-use time is written in the background after authentication.
    let lastUsedAt = key!.lastUsedAt;
    for (let i = 0; i < 50 && !lastUsedAt; i++) {
      await Bun.sleep(20);
      lastUsedAt = (await client.apiKeys.list()).apiKeys[0]!.lastUsedAt;
    }
    expect(lastUsedAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
  });

  test("create answers 201 with the token once; the new key authenticates", async () => {
    const { url, apiKey, client } = await account();
    const res = await fetch(`${url}/v1/api-keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${apiKey}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "  CI pipeline " }),
    });
    expect(res.status).toBe(201);
    const created = (await res.json()) as { id: string; token: string; name: string; organizationId: string; lastUsedAt: string | null; deletedAt: string | null };
    expect(created).toMatchObject({ name: "CI pipeline", lastUsedAt: null, deletedAt: null });
    expect(created.token).toMatch(/^vgl_[A-Za-z0-9_-]{43}$/);

    const viaNewKey = await sdkClient(url, created.token).account.get();
    expect(viaNewKey.organization.id).toBe(created.organizationId);

    const listed = (await client.apiKeys.list()).apiKeys.find((key) => key.id === created.id);
    expect(listed?.token).toBe(`${created.token.slice(0, 12)}…`);
    const fetched = await client.apiKeys.get(created.id);
    expect(fetched.token).toBe(`${created.token.slice(0, 12)}…`);
    expect(fetched.name).toBe("CI pipeline");
  });

  test("create validates the name", async () => {
    const { client } = await account();
    for (const name of ["", "  ", "nul\u0000byte"]) {
      const error = await sdkFailure(client.apiKeys.create({ name }));
      expect(error.statusCode).toBe(400);
      expect(error.body.error).toStartWith("name:");
    }
  });

  test("update renames a key; its token stays the same and keeps working", async () => {
    const { url, client } = await account();
    const created = await client.apiKeys.create({ name: "before" });
    await Bun.sleep(5);
    const renamed = await client.apiKeys.update(created.id, { name: "  after " });
    expect(new Date(renamed.updatedAt).getTime()).toBeGreaterThan(new Date(created.updatedAt).getTime());
    expect(renamed).toMatchObject({ id: created.id, organizationId: created.organizationId, name: "after", deletedAt: null, createdAt: created.createdAt });
    expect(renamed.token).toBe(`${created.token.slice(0, 12)}…`);
    expect((await client.apiKeys.get(created.id)).name).toBe("after");
    expect((await client.apiKeys.list()).apiKeys.find((key) => key.id === created.id)?.name).toBe("after");
    expect((await sdkClient(url, created.token).account.get()).organization.id).toBe(created.organizationId);
  });

  test("update validates the name and only reaches the caller's own keys", async () => {
    const owner = await account();
    const stranger = await account();
    const key = await owner.client.apiKeys.create({ name: "owner's" });
    for (const name of ["", "   ", "nul\u0000byte"]) {
      const error = await sdkFailure(owner.client.apiKeys.update(key.id, { name }));
      expect(error.statusCode).toBe(400);
      expect(error.body.error).toStartWith("name:");
    }
    const missingName = await sdkFailure(owner.client.apiKeys.update(key.id, {} as never));
    expect(missingName.statusCode).toBe(400);
    expect(missingName.body.error).toStartWith("name:");
    expect((await sdkFailure(stranger.client.apiKeys.update(key.id, { name: "mine now" }))).statusCode).toBe(404);
    expect((await sdkFailure(owner.client.apiKeys.update("nosuchkeyid0000000000000", { name: "x" }))).statusCode).toBe(404);
    expect((await owner.client.apiKeys.get(key.id)).name).toBe("owner's");
    const anonymous = await fetch(`${owner.url}/v1/api-keys/${key.id}`, { method: "PATCH", headers: { "content-type": "application/json" }, body: "{}" });
    expect(anonymous.status).toBe(401);
  });

  test("a revocation in one process refuses the key in another within 5 seconds", async () => {
    const first = await sharedVigil();
    // A second Vigil on the same PostgreSQL database: its credential cache is its own.
    const second = await startTestVigil({ DATABASE_URL: first.ctx.config.databaseUrl!, CLICKHOUSE_DATABASE: first.ctx.ch.database });
    try {
      const { client } = await bootstrapAccount(first.url);
      const doomed = await client.apiKeys.create({ name: "revoked elsewhere" });
      const onSecond = sdkClient(second.url, doomed.token);
      await onSecond.account.get(); // now cached by the second process
      await client.apiKeys.revoke(doomed.id);
      const revokedAt = Date.now();
      let status = 200;
      while (status === 200 && Date.now() - revokedAt < 5_000) {
        status = await fetch(`${second.url}/v1/account`, { headers: { authorization: `Bearer ${doomed.token}` } }).then((res) => res.status);
        if (status === 200) await Bun.sleep(100);
      }
      expect(status).toBe(401);
      expect(Date.now() - revokedAt).toBeLessThan(5_000);
    } finally {
      await second.stop();
    }
  });

  test("a revoked key is refused at once with 401 and WWW-Authenticate", async () => {
    const { url, client } = await account();
    const doomed = await client.apiKeys.create({ name: "doomed" });
    const doomedClient = sdkClient(url, doomed.token);
    await doomedClient.projects.list();

    const res = await fetch(`${url}/v1/api-keys/${doomed.id}`, { method: "DELETE", headers: { authorization: `Bearer ${(await account()).apiKey}` } });
    expect(res.status).toBe(404);

    await client.apiKeys.revoke(doomed.id);
    const refused = await sdkFailure(doomedClient.projects.list());
    expect(refused.statusCode).toBe(401);
    expect(refused.rawResponse?.headers.get("www-authenticate")).toBe("Bearer");
    expect(refused.body).toEqual({ error: "Invalid or revoked credentials" });

    const listed = (await client.apiKeys.list()).apiKeys.find((key) => key.id === doomed.id);
    expect(listed?.deletedAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    // Revoking twice is harmless; the caller's own key still works.
    await client.apiKeys.revoke(doomed.id);
    expect((await client.apiKeys.list()).apiKeys).toHaveLength(2);
  });

  test("another organization's key cannot be seen or revoked", async () => {
    const owner = await account();
    const stranger = await account();
    const key = await owner.client.apiKeys.create({ name: "owner's" });
    expect((await sdkFailure(stranger.client.apiKeys.revoke(key.id))).statusCode).toBe(404);
    expect((await sdkFailure(stranger.client.apiKeys.get(key.id))).statusCode).toBe(404);
    expect((await stranger.client.apiKeys.list()).apiKeys.map((k) => k.id)).not.toContain(key.id);
    expect((await sdkClient(owner.url, key.token).account.get()).organization.id).toBe(key.organizationId);
    expect((await sdkFailure(owner.client.apiKeys.revoke("nosuchkeyid0000000000000"))).statusCode).toBe(404);
  });

  test("a wrong or missing key is 401 with WWW-Authenticate", async () => {
    const { url } = await sharedVigil();
    const wrong = await sdkFailure(sdkClient(url, "vgl_not-a-real-key").apiKeys.list());
    expect(wrong.statusCode).toBe(401);
    expect(wrong.rawResponse?.headers.get("www-authenticate")).toBe("Bearer");
    for (const headers of [{}, { authorization: "Basic dXNlcjpwYXNz" }, { authorization: "Bearer" }] as Record<string, string>[]) {
      const res = await fetch(`${url}/v1/api-keys`, { headers });
      expect(res.status).toBe(401);
      expect(res.headers.get("www-authenticate")).toBe("Bearer");
      expect(((await res.json()) as { error: string }).error).toBeString();
    }
  });
});
