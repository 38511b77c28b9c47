import { describe, expect, test } from "bun:test";
import { sharedVigil } from "./helpers";

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
    const res = await fetch(url + "/v1/no-such-thing");
    expect(res.status).toBe(404);
    expect(await res.json()).toEqual({ error: "Not found" });
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

  test("openapi document lists the routes", async () => {
    const { url } = await sharedVigil();
    const doc = (await (await fetch(url + "/openapi.json")).json()) as { paths: Record<string, unknown> };
    expect(doc.paths["/health"]).toBeDefined();
    const page = await fetch(url + "/docs");
    expect(page.status).toBe(200);
    expect(page.headers.get("content-type")).toContain("text/html");
  });
});
