import { t, type Static, type TSchema } from "elysia";
import { Paginated } from "../../lib/pagination";

export const flaggerSlugs = [
  "frustration",
  "nsfw",
  "refusal",
  "laziness",
  "jailbreaking",
  "forgetting",
  "trashing",
  "bluffing",
  "pii-leakage",
  "incompletion",
  "tool-call-errors",
  "output-schema-validation",
  "empty-response",
  "low-cache-hit-rate",
] as const;
export type FlaggerSlug = (typeof flaggerSlugs)[number];

export const redactionEntities = ["email", "phone", "credit_card", "iban", "us_ssn", "ip_address", "secret"] as const;

// Settings reject keys they do not know, so a typo is a 400 instead of a silently ignored setting.
const closed = { additionalProperties: false } as const;

const perFlagger = <T extends TSchema>(schema: () => T) =>
  Object.fromEntries(flaggerSlugs.map((slug) => [slug, schema()])) as { [Slug in FlaggerSlug]: T };

export const RedactionSetting = t.Object(
  {
    mode: t.Optional(t.UnionEnum(["off", "enforce"], { description: "`enforce` redacts PII from spans ingested after the change. Default `off`." })),
    entities: t.Optional(
      t.Array(t.UnionEnum(redactionEntities), {
        maxItems: 7,
        description: "Kinds to redact. Default: email, phone, credit_card, iban, us_ssn, secret.",
      }),
    ),
    scopes: t.Optional(t.Object({ metadata: t.Optional(t.Boolean({ description: "Also scan metadata and tags. Default false." })) }, closed)),
    identities: t.Optional(t.UnionEnum(["keep", "pseudonymize"], { description: "How userId and userEmail are stored. Default `keep`." })),
  },
  closed,
);

export const NotificationsSetting = t.Object(
  {
    incidents: t.Optional(
      t.Object(
        {
          "signal.escalating": t.Optional(t.Boolean()),
          "monitor.match": t.Optional(t.Boolean()),
          "monitor.threshold": t.Optional(t.Boolean()),
          "monitor.escalating": t.Optional(t.Boolean()),
        },
        closed,
      ),
    ),
    destinations: t.Optional(t.Object({ quarantine: t.Optional(t.Boolean()) }, closed)),
  },
  closed,
);

export const EscalationSetting = t.Object(
  { sensitivity: t.Optional(t.Integer({ minimum: 1, maximum: 6, description: "1 is most sensitive, 6 least." })) },
  closed,
);

export const ProjectSettings = t.Object(
  {
    keepMonitoring: t.Optional(t.Boolean({ description: "Keep a resolved signal's evaluation running. Default true." })),
    redaction: t.Optional(RedactionSetting),
    notifications: t.Optional(NotificationsSetting),
    escalation: t.Optional(EscalationSetting),
  },
  closed,
);
export type ProjectSettings = Static<typeof ProjectSettings>;
export type RedactionSetting = Static<typeof RedactionSetting>;

export const Project = t.Object({
  id: t.String(),
  organizationId: t.String(),
  name: t.String(),
  slug: t.String({ description: "Set from the name at creation; renaming never changes it." }),
  settings: t.Union([ProjectSettings, t.Null()], { description: "null: inherit from the organization" }),
  flaggers: t.Object(
    perFlagger(() => t.Boolean()),
    { description: "Whether each flagger runs on this project's traces." },
  ),
  firstTraceAt: t.Union([t.String({ format: "date-time" }), t.Null()]),
  deletedAt: t.Union([t.String({ format: "date-time" }), t.Null()]),
  lastEditedAt: t.String({ format: "date-time" }),
  createdAt: t.String({ format: "date-time" }),
  updatedAt: t.String({ format: "date-time" }),
});
export type Project = Static<typeof Project>;

export const PaginatedProjects = Paginated(Project);

const ProjectName = t.String({ minLength: 1, maxLength: 256 });

export const CreateProjectBody = t.Object({ name: ProjectName }, closed);

/** A flagger's switch and, beyond the client's boolean, the share of its no-match traces the LLM judge reviews. */
const FlaggerPatch = t.Union([
  t.Boolean(),
  t.Object(
    {
      enabled: t.Optional(t.Boolean()),
      sampling: t.Optional(t.Integer({ minimum: 0, maximum: 100, description: "Percent of no-match traces sent to the LLM judge (default 10)." })),
    },
    closed,
  ),
]);

export const FlaggersPatch = t.Object(
  perFlagger(() => t.Optional(FlaggerPatch)),
  { ...closed, description: "Flagger slug → enabled, or {enabled?, sampling?}. Omitted slugs are left as they are." },
);
export type FlaggersPatch = Static<typeof FlaggersPatch>;

export const UpdateProjectBody = t.Object(
  {
    name: t.Optional(ProjectName),
    settings: t.Optional(ProjectSettings),
    flaggers: t.Optional(FlaggersPatch),
  },
  closed,
);
export type UpdateProjectBody = Static<typeof UpdateProjectBody>;

export const OrganizationRedaction = t.Object(
  {
    policy: t.Union([RedactionSetting, t.Null()], {
      description: "Organization-wide redaction: its fields override the projects' own; null leaves each project its own setting.",
    }),
    locked: t.Boolean({ description: "When true, project redaction settings are ignored entirely, not merged." }),
  },
  closed,
);

export const ProjectParams = t.Object({ projectSlug: t.String() });
export const OrganizationParams = t.Object({ organizationId: t.String() });
export const OrganizationProjectParams = t.Object({ organizationId: t.String(), projectId: t.String({ description: "Project id or slug" }) });
