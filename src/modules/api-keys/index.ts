import { Elysia, t } from "elysia";
import type { Context } from "../../context";
import { authGuard } from "../auth";
import { ApiKey, ApiKeyList, ApiKeyListItem, ApiKeyParams, CreateApiKeyBody, UpdateApiKeyBody } from "./model";
import { ApiKeysService } from "./service";

/** The organization's API keys: list, create (token shown once), get, rename and revoke. */
export const apiKeysModule = ({ sql, auth }: Context) => {
  const apiKeys = new ApiKeysService(sql, auth);
  return new Elysia({ name: "api-keys", detail: { tags: ["api-keys"] } })
    .use(authGuard(auth))
    .get("/v1/api-keys", async ({ principal }) => ({ apiKeys: await apiKeys.list(principal.organizationId) }), {
      response: ApiKeyList,
      detail: { summary: "List API keys", description: "Tokens appear masked; revoked keys carry `deletedAt`." },
    })
    .post(
      "/v1/api-keys",
      async ({ principal, body, status }) => status(201, await apiKeys.create(principal.organizationId, body.name, principal.userId)),
      {
        body: CreateApiKeyBody,
        response: { 201: ApiKey },
        detail: { summary: "Create an API key", description: "The response is the only place the token appears; store it." },
      },
    )
    .get("/v1/api-keys/:apiKeyId", ({ principal, params }) => apiKeys.get(principal.organizationId, params.apiKeyId), {
      params: ApiKeyParams,
      response: ApiKeyListItem,
      detail: { summary: "Get an API key", description: "Only SHA-256 digests are stored, so the token is masked here too." },
    })
    .patch("/v1/api-keys/:apiKeyId", ({ principal, params, body }) => apiKeys.rename(principal.organizationId, params.apiKeyId, body.name), {
      params: ApiKeyParams,
      body: UpdateApiKeyBody,
      response: ApiKeyListItem,
      detail: { summary: "Rename an API key", description: "The token never changes: to replace it, create a new key and revoke this one." },
    })
    .delete(
      "/v1/api-keys/:apiKeyId",
      async ({ principal, params, status }) => {
        await apiKeys.revoke(principal.organizationId, params.apiKeyId);
        return status(204, undefined);
      },
      {
        params: ApiKeyParams,
        response: { 204: t.Void() },
        detail: { summary: "Revoke an API key", description: "Takes effect at once in this process and within seconds in the others." },
      },
    );
};
