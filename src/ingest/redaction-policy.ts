import type { Sql } from "../db/postgres";
import { compileRedactor, REDACTION_ENTITIES, type RedactionEntity, type SpanRedactor } from "./redact";

export interface RedactionPolicy {
  mode: "off" | "enforce";
  /** Canonical: no duplicates, in REDACTION_ENTITIES order. */
  entities: RedactionEntity[];
  scopes: { metadata: boolean };
  identities: "keep" | "pseudonymize";
}

export const DEFAULT_REDACTION_POLICY: Readonly<RedactionPolicy> = {
  mode: "off",
  entities: ["secret", "email", "iban", "credit_card", "us_ssn", "phone"],
  scopes: { metadata: false },
  identities: "keep",
};

/** The fields one stored setting sets; a field it leaves unset (or sets to an invalid value) is inherited. */
interface PartialRedactionSetting {
  mode?: RedactionPolicy["mode"];
  entities?: RedactionEntity[];
  metadataScope?: boolean;
  identities?: RedactionPolicy["identities"];
}

const isRecord = (value: unknown): value is Record<string, unknown> => typeof value === "object" && value !== null && !Array.isArray(value);

/** A jsonb value written as a JSON-encoded string (a bound `JSON.stringify` result) reads back as that string. */
function jsonbValue(value: unknown): unknown {
  if (typeof value !== "string") return value;
  try {
    return JSON.parse(value);
  } catch {
    return undefined;
  }
}

/** Reads a stored RedactionSetting (organizations.redaction_policy or projects.settings.redaction) leniently. */
function readSetting(stored: unknown): PartialRedactionSetting {
  if (!isRecord(stored)) return {};
  const setting: PartialRedactionSetting = {};
  if (stored.mode === "off" || stored.mode === "enforce") setting.mode = stored.mode;
  if (Array.isArray(stored.entities)) {
    setting.entities = REDACTION_ENTITIES.filter((entity) => (stored.entities as unknown[]).includes(entity));
  }
  if (isRecord(stored.scopes) && typeof stored.scopes.metadata === "boolean") setting.metadataScope = stored.scopes.metadata;
  if (stored.identities === "keep" || stored.identities === "pseudonymize") setting.identities = stored.identities;
  return setting;
}

/**
 * The policy that applies to a project's spans. The organization policy overrides the project's field by
 * field; a locked organization policy ignores the project's values entirely (defaults fill the gaps).
 */
export function effectivePolicy(orgPolicy: unknown, orgLocked: boolean, projectRedaction: unknown): RedactionPolicy {
  const org = readSetting(orgPolicy);
  const project = orgLocked ? {} : readSetting(projectRedaction);
  const defaults = DEFAULT_REDACTION_POLICY;
  return {
    mode: org.mode ?? project.mode ?? defaults.mode,
    entities: [...(org.entities ?? project.entities ?? defaults.entities)],
    scopes: { metadata: org.metadataScope ?? project.metadataScope ?? defaults.scopes.metadata },
    identities: org.identities ?? project.identities ?? defaults.identities,
  };
}

interface CachedRedactor {
  redactor: Promise<SpanRedactor>;
  expiresAt: number;
}

export interface RedactionPoliciesOptions {
  pseudonymSecret: string | null;
  /** How long a loaded policy is used before it is read again (default 30 s, at most 60 s): other processes see a change within this time. */
  ttlMs?: number;
  now?: () => number;
}

/**
 * Effective redaction policies per (organization, project), read from PostgreSQL and kept in process for
 * `ttlMs` (30 s by default). Settings changes made in this process call `invalidate` so they apply to
 * the next request at once.
 */
export class RedactionPolicies {
  private readonly byOrganization = new Map<string, Map<string, CachedRedactor>>();
  private readonly pseudonymSecret: string | null;
  private readonly ttlMs: number;
  private readonly now: () => number;

  constructor(
    private readonly sql: Sql,
    options: RedactionPoliciesOptions,
  ) {
    this.pseudonymSecret = options.pseudonymSecret;
    this.ttlMs = Math.min(options.ttlMs ?? 30_000, 60_000);
    this.now = options.now ?? Date.now;
  }

  /** The compiled redactor for a project's spans; one cached lookup per batch. Rejects when PostgreSQL fails. */
  forProject(organizationId: string, projectId: string): Promise<SpanRedactor> {
    let projects = this.byOrganization.get(organizationId);
    const cached = projects?.get(projectId);
    const now = this.now();
    if (cached && cached.expiresAt > now) return cached.redactor;
    if (!projects) this.byOrganization.set(organizationId, (projects = new Map()));
    const entry: CachedRedactor = { redactor: this.load(organizationId, projectId), expiresAt: now + this.ttlMs };
    projects.set(projectId, entry);
    entry.redactor.catch(() => {
      // A failed read is not cached: the next batch tries again.
      if (this.byOrganization.get(organizationId)?.get(projectId) === entry) projects.delete(projectId);
    });
    return entry.redactor;
  }

  /** Drops cached policies of one project, or of every project of the organization. */
  invalidate(organizationId: string, projectId?: string): void {
    if (projectId === undefined) this.byOrganization.delete(organizationId);
    else this.byOrganization.get(organizationId)?.delete(projectId);
  }

  private async load(organizationId: string, projectId: string): Promise<SpanRedactor> {
    const [row] = await this.sql<{ redaction_policy: unknown; redaction_locked: boolean; settings: unknown }[]>`
      SELECT o.redaction_policy, o.redaction_locked, p.settings
      FROM organizations o
      LEFT JOIN projects p ON p.id = ${projectId} AND p.organization_id = o.id
      WHERE o.id = ${organizationId}`;
    if (!row) return compileRedactor(DEFAULT_REDACTION_POLICY, this.pseudonymSecret);
    const settings = jsonbValue(row.settings);
    const projectRedaction = isRecord(settings) ? settings.redaction : undefined;
    const policy = effectivePolicy(jsonbValue(row.redaction_policy), row.redaction_locked, projectRedaction);
    return compileRedactor(policy, this.pseudonymSecret);
  }
}
