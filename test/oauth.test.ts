import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { purgeExpiredPeopleAndOAuth } from "../src/oauth/purge";
import { sharedVigil, startTestVigil } from "./helpers";
import { authorize, bearer, connectAgent, pkce, registerClient, signedInOwner, token } from "./oauth-helpers";
import { WebClient } from "./web-client";

setDefaultTimeout(60_000);

describe("authorization server metadata", () => {
  test("is served at the root and under /api/auth with the RFC 8414 fields and agent_auth, every URI answering", async () => {
    const vigil = await sharedVigil();
    const root = (await (await fetch(`${vigil.url}/.well-known/oauth-authorization-server`)).json()) as Record<string, any>;
    const nested = await (await fetch(`${vigil.url}/api/auth/.well-known/oauth-authorization-server`)).json();
    expect(nested).toEqual(root);
    const base = vigil.ctx.config.publicUrl;
    expect(root.issuer).toBe(base);
    expect(root.code_challenge_methods_supported).toEqual(["S256"]);
    expect(root.token_endpoint_auth_methods_supported).toEqual(["none"]);
    expect(root.client_id_metadata_document_supported).toBe(true);
    expect(root.scopes_supported).toEqual(["openid", "profile", "email", "offline_access"]);
    expect(root.agent_auth.identity_types_supported).toEqual(["anonymous", "service_auth"]);
    expect(root.agent_auth.credential_types_supported.identity_assertion.assertion_types_supported).toEqual(["verified_email"]);
    const local = (uri: string) => uri.replace(base, vigil.url);
    expect((await fetch(local(root.agent_auth.register_uri), { method: "POST", headers: { "content-type": "application/json" }, body: "{}" })).status).toBe(201);
    expect((await fetch(local(root.agent_auth.claim_uri))).status).toBe(200);
    expect((await fetch(local(root.agent_auth.identity_endpoint))).status).toBe(401);
    expect((await fetch(local(root.agent_auth.claim_endpoint), { method: "POST" })).status).toBe(401);
    expect((await fetch(local(root.userinfo_endpoint))).status).toBe(401);
  });
});

describe("client registration", () => {
  test("registers a public client with 201 and the registered fields", async () => {
    const vigil = await sharedVigil();
    const { response, body } = await registerClient(vigil.url, "https://agent.example.com/cb");
    expect(response.status).toBe(201);
    expect(body.client_id).toEqual(expect.any(String));
    expect(body.client_id_issued_at).toBeCloseTo(Date.now() / 1000, -2);
    expect(body.redirect_uris).toEqual(["https://agent.example.com/cb"]);
    expect(body.token_endpoint_auth_method).toBe("none");
    expect(body.client_name).toBe("Test Agent");
    for (const uri of ["http://127.0.0.1:4000/cb", "http://localhost/cb", "http://[::1]:8/cb", "com.example.agent:/callback"]) {
      expect((await registerClient(vigil.url, uri)).response.status).toBe(201);
    }
  });

  test("refuses dangerous or malformed redirect URIs and confidential clients", async () => {
    const vigil = await sharedVigil();
    for (const uri of ["javascript:alert(1)", "data:text/html,hi", "https://agent.example.com/cb#frag", "not a uri", "http://agent.example.com/cb", "file:///etc/passwd"]) {
      const { response, body } = await registerClient(vigil.url, uri);
      expect({ uri, status: response.status, error: body.error }).toEqual({ uri, status: 400, error: "invalid_redirect_uri" });
    }
    const secretClient = await registerClient(vigil.url, "https://agent.example.com/cb", { token_endpoint_auth_method: "client_secret_basic" });
    expect(secretClient.response.status).toBe(400);
    expect(secretClient.body.error).toBe("invalid_client_metadata");
  });

  test("past the per-address limit a registration gets 429 with Retry-After and an RFC-style error, and registers nothing", async () => {
    const vigil = await startTestVigil({ OAUTH_REGISTRATION_RATE_LIMIT: "3", TRUSTED_PROXIES: "127.0.0.1,::1" });
    try {
      const from = (address: string, name: string) =>
        fetch(`${vigil.url}/api/auth/mcp/register`, {
          method: "POST",
          headers: { "content-type": "application/json", "x-forwarded-for": address },
          body: JSON.stringify({ client_name: name, redirect_uris: ["https://agent.example.com/cb"], token_endpoint_auth_method: "none" }),
        });
      for (let i = 0; i < 3; i++) expect((await from("203.0.113.7", `Agent ${i}`)).status).toBe(201);
      const refused = await from("203.0.113.7", "Over the limit");
      expect(refused.status).toBe(429);
      const retryAfter = Number(refused.headers.get("retry-after"));
      expect(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 3600).toBe(true);
      const body = (await refused.json()) as Record<string, unknown>;
      expect(body.error).toBe("too_many_requests");
      expect(body.error_description).toEqual(expect.stringContaining("Too many client registrations"));
      expect(body.client_id).toBeUndefined();
      const names = (await vigil.ctx.sql<{ name: string }[]>`SELECT name FROM oauth_clients ORDER BY name`).map((row) => row.name);
      expect(names).toEqual(["Agent 0", "Agent 1", "Agent 2"]);
      // The limit is per client address: another one still registers.
      expect((await from("198.51.100.4", "Elsewhere")).status).toBe(201);
    } finally {
      await vigil.stop();
    }
  });
});

describe("client lifecycle", () => {
  test("a metadata document on a private-network address is never fetched; clients never authorized are pruned after a day", async () => {
    const vigil = await sharedVigil();
    const { web } = await signedInOwner(vigil);
    const { challenge } = pkce();
    for (const clientId of ["https://10.0.0.7/agent/client.json", "https://192.168.1.2/agent/client.json", "http://agent.example.com/client.json"]) {
      const page = await web.get(`/api/auth/mcp/authorize?${new URLSearchParams({ client_id: clientId, redirect_uri: "https://agent.example.com/cb", response_type: "code", code_challenge: challenge, code_challenge_method: "S256" })}`);
      expect({ clientId, status: page.status, location: page.headers.get("location") }).toEqual({ clientId, status: 400, location: null });
    }

    const unused = (await registerClient(vigil.url)).body.client_id as string;
    const { clientId: used } = await connectAgent(vigil, web);
    await vigil.ctx.sql`UPDATE oauth_clients SET created_at = now() - interval '25 hours' WHERE id IN ${vigil.ctx.sql([unused, used])}`;
    await purgeExpiredPeopleAndOAuth(vigil.ctx.sql);
    const left = await vigil.ctx.sql<{ id: string }[]>`SELECT id FROM oauth_clients WHERE id IN ${vigil.ctx.sql([unused, used])}`;
    expect(left.map((row) => row.id)).toEqual([used]);
  }, 120_000);
});

describe("authorization endpoint", () => {
  test("errors before the client's redirect URI is trusted are a page, never a redirect", async () => {
    const vigil = await sharedVigil();
    const { web } = await signedInOwner(vigil);
    const { body: client } = await registerClient(vigil.url);
    const { challenge } = pkce();
    const base = { response_type: "code", code_challenge: challenge, code_challenge_method: "S256" };
    for (const params of [
      { ...base, redirect_uri: "http://127.0.0.1:9/callback" },
      { ...base, client_id: "unknown-client", redirect_uri: "http://127.0.0.1:9/callback" },
      { ...base, client_id: client.client_id as string, redirect_uri: "https://evil.example.com/steal" },
      { ...base, client_id: client.client_id as string },
    ]) {
      const response = await web.get(`/api/auth/mcp/authorize?${new URLSearchParams(params)}`);
      expect(response.status).toBe(400);
      expect(response.headers.get("location")).toBeNull();
      expect(response.headers.get("content-security-policy")).toContain("frame-ancestors 'none'");
    }
  });

  test("protocol errors go back to the client with state: plain PKCE, no challenge, wrong response_type, unknown scope, foreign resource", async () => {
    const vigil = await sharedVigil();
    const { web } = await signedInOwner(vigil);
    const redirectUri = "http://127.0.0.1:9/callback";
    const { body: client } = await registerClient(vigil.url, redirectUri);
    const { challenge } = pkce();
    const base = { client_id: client.client_id as string, redirect_uri: redirectUri, response_type: "code", state: "xyz", code_challenge: challenge, code_challenge_method: "S256" };
    const cases: [Record<string, string>, string][] = [
      [{ ...base, code_challenge_method: "plain" }, "invalid_request"],
      [{ ...base, code_challenge: "" }, "invalid_request"],
      [{ ...base, response_type: "token" }, "unsupported_response_type"],
      [{ ...base, scope: "openid admin" }, "invalid_scope"],
      [{ ...base, resource: "https://elsewhere.example.com/" }, "invalid_target"],
    ];
    for (const [params, error] of cases) {
      const response = await web.get(`/api/auth/mcp/authorize?${new URLSearchParams(params)}`);
      expect(response.status).toBe(302);
      const location = new URL(response.headers.get("location")!);
      expect(`${location.origin}${location.pathname}`).toBe(redirectUri);
      expect({ error: location.searchParams.get("error"), state: location.searchParams.get("state") }).toEqual({ error, state: "xyz" });
    }
  });

  test("not signed in → sign-in page, then back to the consent; deny → access_denied; consent needs its CSRF token", async () => {
    const vigil = await sharedVigil();
    const { email, password } = await signedInOwner(vigil);
    const redirectUri = "http://127.0.0.1:9/callback";
    const { body: client } = await registerClient(vigil.url, redirectUri);
    const { challenge } = pkce();
    const params = { client_id: client.client_id as string, redirect_uri: redirectUri, response_type: "code", state: "st", code_challenge: challenge, code_challenge_method: "S256" };
    const web = new WebClient(vigil.ctx.config.publicUrl);
    const authorizePath = `/api/auth/mcp/authorize?${new URLSearchParams(params)}`;
    const first = await web.get(authorizePath);
    expect(first.status).toBe(302);
    expect(first.headers.get("location")).toBe(`/login?next=${encodeURIComponent(authorizePath)}`);
    await web.get(first.headers.get("location")!);
    const signedIn = await web.post("/login", { email, password, next: authorizePath });
    expect(signedIn.headers.get("location")).toBe(authorizePath);
    const consent = await web.get(authorizePath);
    expect(consent.status).toBe(200);
    expect(web.lastHtml).toContain("Test Agent");
    expect(web.lastHtml).toContain("127.0.0.1:9");

    const forged = await web.post("/api/auth/mcp/authorize", { ...params, decision: "allow", csrf: "forged-token-that-is-long-enough-to-look-real" });
    expect(forged.status).toBe(403);
    const crossSite = await web.post("/api/auth/mcp/authorize", { ...params, decision: "allow" }, { "sec-fetch-site": "cross-site" });
    expect(crossSite.status).toBe(403);

    const denied = await authorize(web, params, { allow: false });
    expect(denied.get("error")).toBe("access_denied");
    expect(denied.get("state")).toBe("st");
    expect(denied.get("code")).toBeNull();
  });
});

describe("token endpoint", () => {
  test("a code works once; its reuse fails and revokes what it issued", async () => {
    const vigil = await sharedVigil();
    const { web } = await signedInOwner(vigil);
    const redirectUri = "http://127.0.0.1:9/callback";
    const { body: client } = await registerClient(vigil.url, redirectUri);
    const clientId = client.client_id as string;
    const freshCode = async () => {
      const { verifier, challenge } = pkce();
      const query = await authorize(web, { response_type: "code", client_id: clientId, redirect_uri: redirectUri, scope: "openid offline_access", code_challenge: challenge, code_challenge_method: "S256" });
      return { grant_type: "authorization_code", code: query.get("code")!, redirect_uri: redirectUri, client_id: clientId, code_verifier: verifier };
    };

    // A failed verifier uses the code up (no guessing online): the right verifier then fails too.
    const guessed = await freshCode();
    const wrongVerifier = await token(vigil.url, { ...guessed, code_verifier: pkce().verifier });
    expect([wrongVerifier.response.status, wrongVerifier.body.error]).toEqual([400, "invalid_grant"]);
    expect((await token(vigil.url, guessed)).body.error).toBe("invalid_grant");
    expect((await token(vigil.url, { ...(await freshCode()), redirect_uri: "http://127.0.0.1:9/other" })).body.error).toBe("invalid_grant");
    const otherClient = (await registerClient(vigil.url, redirectUri)).body.client_id as string;
    expect((await token(vigil.url, { ...(await freshCode()), client_id: otherClient })).body.error).toBe("invalid_grant");
    expect((await token(vigil.url, { ...(await freshCode()), code_verifier: "" })).body.error).toBe("invalid_grant");

    const exchange = await freshCode();
    expect((await token(vigil.url, { ...exchange, code: "vglcode_forged" })).body.error).toBe("invalid_grant");
    const json = await fetch(`${vigil.url}/api/auth/mcp/token`, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(exchange) });
    expect(((await json.json()) as { error: string }).error).toBe("invalid_request");
    expect((await token(vigil.url, { ...exchange, grant_type: "password" })).body.error).toBe("unsupported_grant_type");
    const { grant_type: _omitted, ...withoutGrantType } = exchange;
    expect((await token(vigil.url, withoutGrantType)).body.error).toBe("invalid_request");

    const first = await token(vigil.url, exchange);
    expect(first.response.status).toBe(200);
    expect(first.response.headers.get("cache-control")).toBe("no-store");
    expect(first.body).toEqual({ access_token: expect.any(String), token_type: "Bearer", expires_in: expect.any(Number), refresh_token: expect.any(String), scope: "openid offline_access" });
    expect(Number(first.body.expires_in)).toBeGreaterThan(3590);
    expect((await fetch(`${vigil.url}/v1/account`, { headers: bearer(first.body.access_token) })).status).toBe(200);

    const replay = await token(vigil.url, exchange);
    expect(replay.body.error).toBe("invalid_grant");
    expect((await fetch(`${vigil.url}/v1/account`, { headers: bearer(first.body.access_token) })).status).toBe(401);
    expect((await token(vigil.url, { grant_type: "refresh_token", refresh_token: String(first.body.refresh_token), client_id: clientId })).body.error).toBe("invalid_grant");
  });

  test("an expired code fails; scope beyond the four fails; without offline_access there is no refresh token", async () => {
    const vigil = await sharedVigil();
    const { web } = await signedInOwner(vigil);
    const redirectUri = "http://127.0.0.1:9/callback";
    const clientId = (await registerClient(vigil.url, redirectUri)).body.client_id as string;
    const { verifier, challenge } = pkce();
    const query = await authorize(web, { response_type: "code", client_id: clientId, redirect_uri: redirectUri, scope: "openid", code_challenge: challenge, code_challenge_method: "S256" });
    await vigil.ctx.sql`UPDATE oauth_codes SET expires_at = now() - interval '1 second' WHERE used_at IS NULL`;
    const expired = await token(vigil.url, { grant_type: "authorization_code", code: query.get("code")!, redirect_uri: redirectUri, client_id: clientId, code_verifier: verifier });
    expect(expired.body.error).toBe("invalid_grant");

    const { tokens } = await connectAgent(vigil, web, "openid email");
    expect(tokens.refresh_token).toBeUndefined();
    expect(tokens.scope).toBe("openid email");
  });

  test("refresh tokens rotate; reusing a rotated one revokes the whole grant", async () => {
    const vigil = await sharedVigil();
    const { web } = await signedInOwner(vigil);
    const { clientId, tokens } = await connectAgent(vigil, web);
    const refresh = (refreshToken: unknown) => token(vigil.url, { grant_type: "refresh_token", refresh_token: String(refreshToken), client_id: clientId });
    const second = await refresh(tokens.refresh_token);
    expect(second.response.status).toBe(200);
    expect(second.body.refresh_token).not.toBe(tokens.refresh_token);
    expect((await fetch(`${vigil.url}/v1/account`, { headers: bearer(second.body.access_token) })).status).toBe(200);

    const reuse = await refresh(tokens.refresh_token);
    expect(reuse.body.error).toBe("invalid_grant");
    expect((await fetch(`${vigil.url}/v1/account`, { headers: bearer(second.body.access_token) })).status).toBe(401);
    expect((await refresh(second.body.refresh_token)).body.error).toBe("invalid_grant");
  });
});

describe("using and revoking access tokens", () => {
  test("an access token acts for its user in the granted organization only", async () => {
    const vigil = await sharedVigil();
    const owner = await signedInOwner(vigil, "Granted Org");
    const other = await signedInOwner(vigil, "Other Org");
    const { tokens } = await connectAgent(vigil, owner.web);
    const me = (await (await fetch(`${vigil.url}/v1/account`, { headers: bearer(tokens.access_token) })).json()) as any;
    expect(me.user.email).toBe(owner.email);
    expect(me.role).toBe("owner");
    expect(me.organization.id).toBe(owner.organizationId);
    expect((await fetch(`${vigil.url}/v1/projects/${owner.projectSlug}`, { headers: bearer(tokens.access_token) })).status).toBe(200);
    expect((await fetch(`${vigil.url}/v1/projects/${other.projectSlug}`, { headers: bearer(tokens.access_token) })).status).toBe(404);
    expect((await fetch(`${vigil.url}/v1/organizations/${other.organizationId}/projects`, { headers: bearer(tokens.access_token) })).status).toBe(404);
    const info = (await (await fetch(`${vigil.url}/api/auth/mcp/userinfo`, { headers: bearer(tokens.access_token) })).json()) as any;
    expect(info).toMatchObject({ email: owner.email, name: "Owner", organization_id: owner.organizationId });
  });

  test("revocation by RFC 7009, by the API and by the console each cut access at once", async () => {
    const vigil = await sharedVigil();
    const owner = await signedInOwner(vigil);
    const status = async (accessToken: unknown) => (await fetch(`${vigil.url}/v1/account`, { headers: bearer(accessToken) })).status;

    const viaRevoke = await connectAgent(vigil, owner.web);
    const revoked = await fetch(`${vigil.url}/api/auth/mcp/revoke`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: String(viaRevoke.tokens.refresh_token), client_id: viaRevoke.clientId }).toString(),
    });
    expect(revoked.status).toBe(200);
    expect(await status(viaRevoke.tokens.access_token)).toBe(401);

    const viaApi = await connectAgent(vigil, owner.web);
    const { oauthKeys } = await owner.apiClient.oauthKeys.list();
    const key = oauthKeys.find((k) => !k.disabled && k.clientId === viaApi.clientId)!;
    expect(key).toMatchObject({ userEmail: owner.email, clientName: "Test Agent", disabled: false });
    await owner.apiClient.oauthKeys.revoke(key.id);
    expect(await status(viaApi.tokens.access_token)).toBe(401);
    expect((await owner.apiClient.oauthKeys.get(key.id)).disabled).toBe(true);

    const viaConsole = await connectAgent(vigil, owner.web);
    await owner.web.get("/settings/keys");
    const grantId = (await owner.apiClient.oauthKeys.list()).oauthKeys.find((k) => k.clientId === viaConsole.clientId)!.id;
    expect(owner.web.lastHtml).toContain(`/settings/oauth-keys/${grantId}/revoke`);
    expect((await owner.web.post(`/settings/oauth-keys/${grantId}/revoke`, {})).status).toBe(303);
    expect(await status(viaConsole.tokens.access_token)).toBe(401);
  });
});
