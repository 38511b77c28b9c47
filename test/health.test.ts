import { describe, expect, setDefaultTimeout, test } from "bun:test";
import { sharedVigil } from "./helpers";

setDefaultTimeout(60_000);

describe("health and discovery", () => {
  test("health answers on both paths", async () => {
    const { url } = await sharedVigil();
    for (const path of ["/health", "/v1/health"]) {
      const res = await fetch(url + path);
      expect(res.status).toBe(200);
      expect(await res.json()).toEqual({ service: "api", status: "ok" });
    }
  });

  test("unknown routes are 404 with an error body", async () => {
    const { url } = await sharedVigil();
    for (const path of ["/v1/no-such-thing", "/settings/no-such-page", "/no-such-page"]) {
      // A browser asking for HTML still gets the JSON error: the console's HTML rendering stays on its own routes.
      const res = await fetch(url + path, { headers: { accept: "text/html" } });
      expect(res.status).toBe(404);
      expect(res.headers.get("content-type")).toStartWith("application/json");
      expect(await res.json()).toEqual({ error: "Not found" });
    }
    const page = await fetch(url + "/login");
    expect(page.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(await page.text()).toStartWith("<!doctype html>");
  });

  test("protected resource metadata", async () => {
    const { url, ctx } = await sharedVigil();
    const base = (await (await fetch(url + "/.well-known/oauth-protected-resource")).json()) as Record<string, unknown>;
    expect(base.resource).toBe(ctx.config.publicUrl);
    expect(base.authorization_servers).toEqual([ctx.config.publicUrl]);
    expect(base.bearer_methods_supported).toEqual(["header"]);
    expect(base.scopes_supported).toEqual(["openid", "profile", "email", "offline_access"]);
    const mcp = (await (await fetch(url + "/.well-known/oauth-protected-resource/v1/mcp")).json()) as Record<string, unknown>;
    expect(mcp.resource).toBe(`${ctx.config.publicUrl}/v1/mcp`);
  });

  test("openapi document lists the routes of every group, tagged with it", async () => {
    const { url } = await sharedVigil();
    const doc = (await (await fetch(url + "/openapi.json")).json()) as { paths: Record<string, Record<string, { tags?: string[] }>> };
    const groups: Record<string, string[]> = {
      health: ["get /health", "get /v1/health", "get /.well-known/oauth-protected-resource", "get /.well-known/oauth-protected-resource/v1/mcp"],
      account: ["post /v1/account/bootstrap", "get /v1/account", "post /v1/account/claim"],
      members: ["get /v1/members", "post /v1/members", "get /v1/members/{memberId}", "patch /v1/members/{memberId}", "delete /v1/members/{memberId}"],
      "oauth-keys": ["get /v1/oauth-keys", "get /v1/oauth-keys/{oauthKeyId}", "delete /v1/oauth-keys/{oauthKeyId}"],
      projects: [
        "post /v1/projects",
        "get /v1/projects",
        "get /v1/projects/{projectSlug}",
        "patch /v1/projects/{projectSlug}",
        "delete /v1/projects/{projectSlug}",
        "post /v1/organizations/{organizationId}/projects",
        "get /v1/organizations/{organizationId}/projects",
        "get /v1/organizations/{organizationId}/projects/{projectId}",
        "patch /v1/organizations/{organizationId}/projects/{projectId}",
        "delete /v1/organizations/{organizationId}/projects/{projectId}",
        "get /v1/organization/redaction",
        "put /v1/organization/redaction",
      ],
      "api-keys": ["get /v1/api-keys", "post /v1/api-keys", "get /v1/api-keys/{apiKeyId}", "patch /v1/api-keys/{apiKeyId}", "delete /v1/api-keys/{apiKeyId}"],
      ingest: ["post /v1/traces"],
      traces: [
        "post /v1/projects/{projectSlug}/traces/list",
        "get /v1/projects/{projectSlug}/traces/analytics",
        "post /v1/projects/{projectSlug}/traces/export",
        "get /v1/projects/{projectSlug}/traces/{traceId}",
        "get /v1/projects/{projectSlug}/traces/{traceId}/spans",
        "get /v1/projects/{projectSlug}/traces/{traceId}/spans/{spanId}",
      ],
      scores: ["post /v1/projects/{projectSlug}/scores"],
      gateway: [
        "get /api/v3/projects",
        "post /api/v3/projects/{projectId}/versions/{versionUuid}/documents/run",
        "post /api/v3/conversations/{conversationUuid}/chat",
        "post /api/v3/conversations/{conversationUuid}/attach",
        "post /api/v3/tools/results",
      ],
      annotations: ["post /v1/projects/{projectSlug}/annotations", "get /v1/projects/{projectSlug}/annotations/{annotationId}", "get /v1/projects/{projectSlug}/traces/{traceId}/annotations"],
    };
    for (const [group, routes] of Object.entries(groups)) {
      for (const route of routes) {
        const [method, path] = route.split(" ") as [string, string];
        expect({ route, tags: doc.paths[path]?.[method]?.tags }).toEqual({ route, tags: [group] });
      }
    }
    const page = await fetch(url + "/docs");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
  });
});
