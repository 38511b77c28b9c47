import { describe, expect, test } from "bun:test";
import { bootstrapAccount, sharedVigil } from "./helpers";
import { sdkClient, sdkFailure } from "./sdk";

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
    for (const name of ["", "  "]) {
      const error = await sdkFailure(client.apiKeys.create({ name }));
      expect(error.statusCode).toBe(400);
      expect(error.body.error).toStartWith("name:");
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
