import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { bootstrapAccount, sharedVigil } from "./helpers";

setDefaultTimeout(60_000);

const jsonHeaders = { "content-type": "application/json" };

async function expectUnauthorized(res: Response) {
  expect(res.status).toBe(401);
  expect(res.headers.get("www-authenticate")).toBe("Bearer");
  expect(((await res.json()) as { error: string }).error).toBeString();
}

describe("the credential is checked before the request's content", () => {
  test("no key and a bad body or query is 401, not a validation error", async () => {
    const { url } = await sharedVigil();
    const wrongKey = { authorization: "Bearer vgl_not-a-real-key" };
    for (const headers of [{}, wrongKey]) {
      // Validation of the body schema, of the undeclared-field check, of the query, of the JSON itself.
      await expectUnauthorized(await fetch(`${url}/v1/projects`, { method: "POST", headers: { ...jsonHeaders, ...headers }, body: "{}" }));
      await expectUnauthorized(await fetch(`${url}/v1/projects`, { method: "POST", headers: { ...jsonHeaders, ...headers }, body: '{"name":"x","colour":"red"}' }));
      await expectUnauthorized(await fetch(`${url}/v1/projects?limit=x`, { headers }));
      await expectUnauthorized(await fetch(`${url}/v1/projects`, { method: "POST", headers: { ...jsonHeaders, ...headers }, body: "{not json" }));
      await expectUnauthorized(await fetch(`${url}/v1/api-keys`, { method: "POST", headers: { ...jsonHeaders, ...headers }, body: '{"name":""}' }));
      await expectUnauthorized(await fetch(`${url}/v1/api-keys/x`, { method: "PATCH", headers: { ...jsonHeaders, ...headers }, body: "[]" }));
    }
  });

  test("with a valid key the same requests get their validation errors", async () => {
    const { url } = await sharedVigil();
    const { account } = await bootstrapAccount(url);
    const headers = { authorization: `Bearer ${account.apiKey}` };
    const missingName = await fetch(`${url}/v1/projects`, { method: "POST", headers: { ...jsonHeaders, ...headers }, body: "{}" });
    expect(missingName.status).toBe(400);
    expect(((await missingName.json()) as { error: string }).error).toStartWith("name:");
    const badLimit = await fetch(`${url}/v1/projects?limit=x`, { headers });
    expect(badLimit.status).toBe(400);
    expect(((await badLimit.json()) as { error: string }).error).toStartWith("limit:");
    const malformed = await fetch(`${url}/v1/projects`, { method: "POST", headers: { ...jsonHeaders, ...headers }, body: "{not json" });
    expect(malformed.status).toBe(400);
    const created = await fetch(`${url}/v1/projects`, { method: "POST", headers: { ...jsonHeaders, ...headers }, body: '{"name":"Checked after auth"}' });
    expect(created.status).toBe(201);
  });

  test("routes without authentication still validate as before", async () => {
    const { url } = await sharedVigil();
    const res = await fetch(`${url}/v1/account/bootstrap`, { method: "POST", headers: jsonHeaders, body: '{"userEmail":"nope"}' });
    expect(res.status).toBe(400);
    expect(((await res.json()) as { error: string }).error).toStartWith("userEmail:");
  });
});
