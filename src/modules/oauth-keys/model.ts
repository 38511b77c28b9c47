import { t, type Static } from "elysia";

export const OAuthKey = t.Object({
  id: t.String({ description: "The grant: one user's consent to one client in this organization" }),
  clientId: t.String(),
  clientName: t.Union([t.String(), t.Null()]),
  clientIcon: t.Union([t.String(), t.Null()]),
  userId: t.String(),
  userName: t.Union([t.String(), t.Null()]),
  userEmail: t.String(),
  lastActivityAt: t.Union([t.String({ format: "date-time" }), t.Null()], { description: "Last use of its tokens, updated at most once a minute" }),
  connectedAt: t.String({ format: "date-time" }),
  disabled: t.Boolean({ description: "True once revoked" }),
});
export type OAuthKey = Static<typeof OAuthKey>;

export const OAuthKeyList = t.Object({ oauthKeys: t.Array(OAuthKey) });

export const OAuthKeyParams = t.Object({ oauthKeyId: t.String() });
