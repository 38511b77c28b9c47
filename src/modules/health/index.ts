import { Elysia, t } from "elysia";
import type { Context } from "../../context";

const HealthResponse = t.Object({ service: t.Literal("api"), status: t.Literal("ok") });
const ProtectedResourceMetadata = t.Object({
  resource: t.String(),
  authorization_servers: t.Array(t.String()),
  scopes_supported: t.Array(t.String()),
  bearer_methods_supported: t.Array(t.String()),
});

export const healthModule = ({ config }: Context) => {
  const health = () => ({ service: "api" as const, status: "ok" as const });
  const protectedResource = () => ({
    resource: config.publicUrl,
    authorization_servers: [config.publicUrl],
    scopes_supported: ["openid", "profile", "email", "offline_access"],
    bearer_methods_supported: ["header"],
  });
  return new Elysia({ name: "health", detail: { tags: ["health"] } })
    .get("/health", health, { response: HealthResponse })
    .get("/v1/health", health, { response: HealthResponse })
    .get("/.well-known/oauth-protected-resource", protectedResource, { response: ProtectedResourceMetadata })
    .get("/.well-known/oauth-protected-resource/v1/mcp", () => ({ ...protectedResource(), resource: `${config.publicUrl}/v1/mcp` }), {
      response: ProtectedResourceMetadata,
    });
};
