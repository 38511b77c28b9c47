// The whole agent journey with real clients: the MCP SDK's Streamable HTTP transport and OAuth
// client provider against a running Vigil, the sign-in and consent pages in a real Chromium.
import { afterAll, beforeAll, describe, expect, setDefaultTimeout, test } from "bun:test";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import type { OAuthClientProvider } from "@modelcontextprotocol/sdk/client/auth.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { OAuthClientInformationMixed, OAuthClientMetadata, OAuthTokens } from "@modelcontextprotocol/sdk/shared/auth.js";
import { chromium, type Browser } from "playwright-core";
import type { Vigil } from "../src/server";
import { sharedVigil } from "./helpers";
import { bearer, signedInOwner } from "./oauth-helpers";

setDefaultTimeout(120_000);

/** A callback server standing in for the agent's redirect endpoint: it records each code it receives. */
function startCallbackServer() {
  const codes: URLSearchParams[] = [];
  const server = Bun.serve({
    hostname: "127.0.0.1",
    port: 0,
    fetch(request) {
      codes.push(new URL(request.url).searchParams);
      return new Response("<!doctype html><title>done</title><p>You can close this window.</p>", { headers: { "content-type": "text/html" } });
    },
  });
  return { server, codes, redirectUrl: `http://127.0.0.1:${server.port}/callback` };
}

class TestOAuthProvider implements OAuthClientProvider {
  information?: OAuthClientInformationMixed;
  saved?: OAuthTokens;
  verifier = "";
  authorizationUrl?: URL;

  constructor(
    readonly redirectUrl: string,
    readonly clientMetadataUrl?: string,
  ) {}

  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: "Browser Test Agent",
      redirect_uris: [this.redirectUrl],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
      scope: "openid profile email offline_access",
    };
  }
  clientInformation() {
    return this.information;
  }
  saveClientInformation(information: OAuthClientInformationMixed) {
    this.information = information;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens: OAuthTokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
  invalidateCredentials(scope: "all" | "client" | "tokens" | "verifier" | "discovery") {
    if (scope === "all" || scope === "tokens") this.saved = undefined;
    if (scope === "all" || scope === "client") this.information = undefined;
  }
}

let browser: Browser;
beforeAll(async () => {
  browser = await chromium.launch({ executablePath: "/usr/bin/chromium", headless: true, args: ["--no-sandbox"] });
});
afterAll(async () => {
  await browser?.close();
});

/**
 * Connects the MCP client: the first attempt gets a 401, discovers the authorization server, registers
 * (or presents its metadata document) and asks for the browser; the person signs in and allows; the
 * code is exchanged; the second attempt connects.
 */
async function connectThroughBrowser(vigil: Vigil, provider: TestOAuthProvider, callback: ReturnType<typeof startCallbackServer>, person: { email: string; password: string }) {
  const mcpUrl = new URL(`${vigil.ctx.config.publicUrl}/v1/mcp`);
  const firstTransport = new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider });
  await expect(new Client({ name: "agent", version: "1.0.0" }).connect(firstTransport)).rejects.toThrow(/Unauthorized/i);
  expect(provider.authorizationUrl?.pathname).toBe("/api/auth/mcp/authorize");
  expect(provider.authorizationUrl?.searchParams.get("code_challenge_method")).toBe("S256");

  const page = await browser.newPage();
  try {
    await page.goto(provider.authorizationUrl!.toString());
    expect(new URL(page.url()).pathname).toBe("/login");
    await page.getByLabel("Email").fill(person.email);
    await page.getByLabel("Password").fill(person.password);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.waitForURL((url) => url.pathname === "/api/auth/mcp/authorize");
    expect(await page.textContent("main")).toContain("Browser Test Agent");
    expect(await page.textContent("main")).toContain(new URL(callback.redirectUrl).host);
    const received = callback.codes.length;
    await page.getByRole("button", { name: "Allow" }).click();
    await page.waitForURL((url) => url.pathname === "/callback");
    expect(callback.codes.length).toBe(received + 1);
  } finally {
    await page.close();
  }
  const code = callback.codes.at(-1)!.get("code")!;
  await firstTransport.finishAuth(code);
  expect(provider.saved?.refresh_token).toEqual(expect.any(String));
  const client = new Client({ name: "agent", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(mcpUrl, { authProvider: provider }));
  return client;
}

const text = (result: Awaited<ReturnType<Client["callTool"]>>) => (result.content as { text: string }[])[0]!.text;

describe("an MCP agent connects through OAuth with a person in the browser", () => {
  test("registration, sign-in, consent, tools, refresh, revocation", async () => {
    const vigil = await sharedVigil();
    const owner = await signedInOwner(vigil, "Browser Org");
    const callback = startCallbackServer();
    try {
      const provider = new TestOAuthProvider(callback.redirectUrl);
      const client = await connectThroughBrowser(vigil, provider, callback, owner);
      expect(provider.information?.client_id).toEqual(expect.any(String));

      const me = JSON.parse(text(await client.callTool({ name: "getAccount", arguments: {} })));
      expect(me.user.email).toBe(owner.email);
      expect(me.organization.id).toBe(owner.organizationId);
      const projects = JSON.parse(text(await client.callTool({ name: "listProjects", arguments: {} })));
      expect(projects.items.map((p: { slug: string }) => p.slug)).toEqual([owner.projectSlug]);

      // The access token expires: the transport's next call gets a 401, refreshes (rotating) and retries.
      const firstAccess = provider.saved!.access_token;
      const firstRefresh = provider.saved!.refresh_token;
      await vigil.ctx.sql`UPDATE oauth_tokens SET expires_at = now() - interval '1 second' WHERE kind = 'access' AND grant_id IN (
        SELECT id FROM oauth_grants WHERE organization_id = ${owner.organizationId})`;
      expect((await fetch(`${vigil.url}/v1/account`, { headers: bearer(firstAccess) })).status).toBe(401);
      const again = JSON.parse(text(await client.callTool({ name: "getAccount", arguments: {} })));
      expect(again.user.email).toBe(owner.email);
      expect(provider.saved!.access_token).not.toBe(firstAccess);
      expect(provider.saved!.refresh_token).not.toBe(firstRefresh);

      // The owner revokes the agent: its token is refused at once, and refreshing fails too.
      const { oauthKeys } = await owner.apiClient.oauthKeys.list();
      expect(oauthKeys).toHaveLength(1);
      expect(oauthKeys[0]).toMatchObject({ clientName: "Browser Test Agent", userEmail: owner.email, disabled: false });
      await owner.apiClient.oauthKeys.revoke(oauthKeys[0]!.id);
      expect((await fetch(`${vigil.url}/v1/account`, { headers: bearer(provider.saved!.access_token) })).status).toBe(401);
      const mcpAfter = await fetch(`${vigil.url}/v1/mcp`, {
        method: "POST",
        headers: { ...bearer(provider.saved!.access_token), "content-type": "application/json", accept: "application/json, text/event-stream" },
        body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
      });
      expect(mcpAfter.status).toBe(401);
      await expect(client.callTool({ name: "getAccount", arguments: {} })).rejects.toThrow(/Unauthorized/i);
    } finally {
      callback.server.stop(true);
    }
  });

  test("the same with a Client ID Metadata Document served by the agent", async () => {
    const vigil = await sharedVigil();
    const owner = await signedInOwner(vigil, "Document Org");
    const callback = startCallbackServer();
    // The SDK requires an https document URL: a self-signed certificate on loopback, trusted for this test only.
    const dir = mkdtempSync(join(tmpdir(), "vigil-cimd-"));
    execFileSync("openssl", ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem"), "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"], { stdio: "ignore" });
    let documentRequests = 0;
    const documentServer = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      tls: { key: readFileSync(join(dir, "key.pem"), "utf8"), cert: readFileSync(join(dir, "cert.pem"), "utf8") },
      fetch(request): Response {
        documentRequests++;
        const clientId = `https://127.0.0.1:${new URL(request.url).port}/agent/client.json`;
        if (new URL(request.url).pathname !== "/agent/client.json") return new Response("not found", { status: 404 });
        return Response.json({ client_id: clientId, client_name: "Browser Test Agent", redirect_uris: [callback.redirectUrl], grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], token_endpoint_auth_method: "none" });
      },
    });
    const previousTls = process.env.NODE_TLS_REJECT_UNAUTHORIZED;
    process.env.NODE_TLS_REJECT_UNAUTHORIZED = "0";
    try {
      const documentUrl = `https://127.0.0.1:${documentServer.port}/agent/client.json`;
      const provider = new TestOAuthProvider(callback.redirectUrl, documentUrl);
      const client = await connectThroughBrowser(vigil, provider, callback, owner);
      expect(provider.information?.client_id).toBe(documentUrl);
      expect(documentRequests).toBeGreaterThan(0);
      const me = JSON.parse(text(await client.callTool({ name: "getAccount", arguments: {} })));
      expect(me.user.email).toBe(owner.email);
      const [key] = (await owner.apiClient.oauthKeys.list()).oauthKeys;
      expect(key).toMatchObject({ clientId: documentUrl, clientName: "Browser Test Agent" });
    } finally {
      if (previousTls === undefined) delete process.env.NODE_TLS_REJECT_UNAUTHORIZED;
      else process.env.NODE_TLS_REJECT_UNAUTHORIZED = previousTls;
      documentServer.stop(true);
      callback.server.stop(true);
    }
  });
});
