import { Value } from "@sinclair/typebox/value";
import type { Sql } from "../../db/postgres";
import { badRequest } from "../../lib/errors";
import { newId, sha256Hex } from "../../lib/ids";
import { signalSlug } from "./discovery";
import { describeValueError } from "../../lib/validation";
import { validateTraceFilters } from "../traces/filters";
import type { ProjectRef } from "../traces/service";
import { EvaluationSettings, type CreateSignalBody } from "./model";
import { invalidPattern } from "./rules";
import type { SignalRow } from "./service";

/** What a custom signal's detector may be; scripts are a 400 that says so. */
function evaluationSettings(evaluation: CreateSignalBody["evaluation"]): EvaluationSettings {
  const hasSettings = evaluation.settings !== undefined;
  const hasScript = evaluation.script !== undefined;
  if (hasSettings === hasScript) throw badRequest("evaluation: provide exactly one of settings or script");
  if (hasScript) throw badRequest('evaluation.script: scripts are not supported; use evaluation.settings with kind "rule" or "judge"');
  const error = Value.Errors(EvaluationSettings, evaluation.settings).First();
  if (error) {
    const kind = (evaluation.settings as { kind?: unknown } | null)?.kind;
    if (kind !== "rule" && kind !== "judge") throw badRequest('evaluation.settings.kind: must be "rule" or "judge"');
    throw badRequest(`evaluation.settings${error.path.replaceAll("/", ".")}: ${describeValueError(error as Parameters<typeof describeValueError>[0])}`);
  }
  const settings = evaluation.settings as EvaluationSettings;
  const invalid = settings.kind === "rule" ? invalidPattern(settings) : null;
  if (invalid) {
    throw badRequest(`evaluation.settings.conditions.${invalid.index}.value: is not a valid regular expression in RE2 syntax (no lookarounds or backreferences): ${invalid.reason}`);
  }
  return settings;
}

function checkFilters(filters: CreateSignalBody["filters"]) {
  if (!filters) return null;
  const present = Object.fromEntries(Object.entries(filters).filter(([, conditions]) => conditions !== null));
  validateTraceFilters(present);
  return present;
}

/** The version hash of an evaluation: what an evaluation score's `metadata.evaluationHash` names. */
export const evaluationHash = (settings: EvaluationSettings, filters: unknown) => sha256Hex(JSON.stringify({ settings, filters })).slice(0, 16);

/** A custom signal and its detector evaluation, in one transaction. */
export async function createCustomSignal(sql: Sql, project: ProjectRef, body: CreateSignalBody) {
  const settings = evaluationSettings(body.evaluation);
  const filters = checkFilters(body.filters);
  const id = newId();
  const evaluationId = newId();
  return sql.begin(async (tx) => {
    const slug = await signalSlug(tx, project.id, body.name, id);
    await tx`
      INSERT INTO signals (id, organization_id, project_id, slug, name, description, source, priority, visible_at, named_at)
      VALUES (${id}, ${project.organizationId}, ${project.id}, ${slug}, ${body.name}, ${body.description}, 'custom', ${body.priority ?? null}, now(), now())`;
    await insertEvaluation(tx as unknown as Sql, project, id, evaluationId, body.name, body.description, settings, filters);
    return { id, slug, evaluationId };
  });
}

async function insertEvaluation(
  sql: Sql,
  project: ProjectRef,
  signalId: string,
  evaluationId: string,
  name: string,
  description: string,
  settings: EvaluationSettings,
  filters: unknown,
) {
  await sql`
    INSERT INTO evaluations (id, organization_id, project_id, signal_id, name, description, settings, filters, hash)
    VALUES (${evaluationId}, ${project.organizationId}, ${project.id}, ${signalId}, ${name}, ${description},
      ${sql.json(settings as never)}, ${filters === null ? null : sql.json(filters as never)}, ${evaluationHash(settings, filters)})`;
}

/**
 * Starts monitoring a signal: realigns its active evaluation when it has one (the confusion matrix is
 * recounted), else creates a judge evaluation whose criteria are the signal's description.
 */
export async function monitorSignal(sql: Sql, project: ProjectRef, signal: SignalRow) {
  const [active] = await sql<{ id: string; aligned_at: Date | null }[]>`
    SELECT id, aligned_at FROM evaluations WHERE signal_id = ${signal.id} AND archived_at IS NULL AND deleted_at IS NULL LIMIT 1`;
  if (active) {
    if (active.aligned_at && Date.now() - active.aligned_at.getTime() < 5_000) throw badRequest("Monitoring is already in progress for this signal");
    await sql`UPDATE evaluations SET aligned_at = now(), updated_at = now() WHERE id = ${active.id}`;
    return { jobId: newId(), evaluationId: active.id };
  }
  const criteria = `${signal.name}. ${signal.description}`.trim();
  await insertEvaluation(sql, project, signal.id, newId(), signal.name, signal.description, { kind: "judge", criteria }, null);
  return { jobId: newId(), evaluationId: null };
}

export async function unmonitorSignal(sql: Sql, signal: SignalRow) {
  await sql`UPDATE evaluations SET archived_at = now(), updated_at = now() WHERE signal_id = ${signal.id} AND archived_at IS NULL`;
}
