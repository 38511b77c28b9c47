import { t, type Static } from "elysia";

export const BootstrapAccountBody = t.Object({
  organizationName: t.Optional(t.String({ minLength: 1, maxLength: 256, default: "My Organization" })),
  projectName: t.Optional(t.String({ minLength: 1, maxLength: 256, default: "My Project" })),
  userEmail: t.Optional(t.String({ format: "email", maxLength: 320, description: "Where the claim link is sent" })),
});
export type BootstrapAccountBody = Static<typeof BootstrapAccountBody>;

export const BootstrapAccountResponse = t.Object({
  organizationSlug: t.String(),
  projectSlug: t.String(),
  apiKey: t.String({ description: "Organization-scoped API key; shown only here" }),
  claimUrl: t.String({ description: "Open in a browser to take ownership of the organization" }),
  claimEmail: t.Union([t.String(), t.Null()]),
  claimExpiresAt: t.String({ format: "date-time", description: "The organization is deleted if still unclaimed then" }),
});
export type BootstrapAccountResponse = Static<typeof BootstrapAccountResponse>;

export const Role = t.UnionEnum(["owner", "admin", "member"]);
export type Role = Static<typeof Role>;

export const AccountResponse = t.Object({
  user: t.Union([
    t.Object({ id: t.String(), email: t.String(), name: t.Union([t.String(), t.Null()]), image: t.Union([t.String(), t.Null()]) }),
    t.Null(),
  ]),
  organization: t.Object({ id: t.String(), name: t.String(), slug: t.String() }),
  role: t.Union([Role, t.Null()], { description: "null for API keys, which belong to the organization rather than a user" }),
});
export type AccountResponse = Static<typeof AccountResponse>;

export const ClaimParams = t.Object({ token: t.String() });

export const ClaimForm = t.Object({
  email: t.String({ maxLength: 320 }),
  name: t.Optional(t.String({ maxLength: 256 })),
  password: t.String({ maxLength: 256 }),
  csrf: t.Optional(t.String()),
});

export const ReissueClaimBody = t.Object({ email: t.String({ format: "email", maxLength: 320, description: "Where the new claim link is sent" }) });
export const ReissueClaimResponse = t.Object({ claimEmail: t.String(), claimExpiresAt: t.String({ format: "date-time" }) });
