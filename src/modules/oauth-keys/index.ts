import { Elysia, t } from "elysia";
import type { Context } from "../../context";
import { authGuard } from "../auth";
import { MembersService } from "../members/service";
import { OAuthKey, OAuthKeyList, OAuthKeyParams } from "./model";
import { OAuthKeysService } from "./service";

/** Connected agents (OAuth grants): list, get, revoke. */
export const oauthKeysModule = ({ sql, auth }: Context) => {
  const oauthKeys = new OAuthKeysService(sql);
  return new Elysia({ name: "oauth-keys", detail: { tags: ["oauth-keys"] } })
    .use(authGuard(auth))
    .get("/v1/oauth-keys", async ({ principal }) => ({ oauthKeys: await oauthKeys.list(principal.organizationId) }), {
      response: OAuthKeyList,
      detail: { operationId: "listOAuthKeys", summary: "List OAuth keys", description: "Agents connected through OAuth, revoked ones with `disabled: true`." },
    })
    .get("/v1/oauth-keys/:oauthKeyId", ({ principal, params }) => oauthKeys.get(principal.organizationId, params.oauthKeyId), {
      params: OAuthKeyParams,
      response: OAuthKey,
      detail: { operationId: "getOAuthKey", summary: "Get an OAuth key" },
    })
    .delete(
      "/v1/oauth-keys/:oauthKeyId",
      async ({ principal, params, status }) => {
        const actor = { userId: principal.userId, role: principal.userId ? await MembersService.roleOf(sql, principal.organizationId, principal.userId) : null };
        await oauthKeys.revoke(actor, principal.organizationId, params.oauthKeyId);
        return status(204, undefined);
      },
      {
        params: OAuthKeyParams,
        response: { 204: t.Void() },
        detail: { operationId: "revokeOAuthKey", summary: "Revoke an OAuth key", description: "Its access and refresh tokens stop working at once, in every process." },
      },
    );
};
