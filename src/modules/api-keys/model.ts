import { t, type Static } from "elysia";

const apiKeyFields = {
  id: t.String(),
  organizationId: t.String(),
  name: t.String(),
  lastUsedAt: t.Union([t.String({ format: "date-time" }), t.Null()], { description: "Updated at most once a minute" }),
  deletedAt: t.Union([t.String({ format: "date-time" }), t.Null()], { description: "When the key was revoked; null while active" }),
  createdAt: t.String({ format: "date-time" }),
  updatedAt: t.String({ format: "date-time" }),
};

/** A key as created: the only time its token is shown, since only its SHA-256 digest is stored. */
export const ApiKey = t.Object({ ...apiKeyFields, token: t.String({ description: "The secret; store it now, it is not shown again" }) });
export type ApiKey = Static<typeof ApiKey>;

export const ApiKeyListItem = t.Object({ ...apiKeyFields, token: t.String({ description: "Masked preview: the first characters of the token" }) });
export type ApiKeyListItem = Static<typeof ApiKeyListItem>;

export const ApiKeyList = t.Object({ apiKeys: t.Array(ApiKeyListItem) });

export const CreateApiKeyBody = t.Object({ name: t.String({ minLength: 1, maxLength: 256 }) });

export const UpdateApiKeyBody = t.Object({ name: t.String({ minLength: 1, maxLength: 256, description: "The new name; the token never changes" }) });

export const ApiKeyParams = t.Object({ apiKeyId: t.String() });
