import { scan } from "promptl-ai";
import type { Queryable, Sql } from "../db/postgres";
import { badRequest, notFound } from "../lib/errors";
import { sha256Hex } from "../lib/ids";
import { GatewayError } from "./errors";
import type { ProviderResolver } from "./providers";
import type { VersionRef, VersionsService } from "./versions";

/** A prompt (document) as the gateway client reads it. */
export interface Prompt {
  versionUuid: string;
  uuid: string;
  path: string;
  content: string;
  contentHash: string;
  config: Record<string, unknown>;
  parameters: Record<string, { type: "text" | "image" | "file" }>;
  provider?: string;
}

interface DocumentRow {
  path: string;
  document_uuid: string;
  content: string;
  content_hash: string;
}

export interface PushChange {
  path: string;
  content?: string;
  status: "added" | "modified" | "deleted" | "unchanged";
}

/** A document path: segments separated by slashes, no empty, `.` or `..` segment. */
function checkPath(path: unknown): string {
  if (typeof path !== "string" || !path.trim()) throw badRequest("path: is required");
  const clean = path.trim().replace(/^\/+/, "");
  if (clean.length > 255) throw badRequest("path: at most 255 characters");
  if (clean.split("/").some((segment) => !segment || segment === "." || segment === "..")) throw badRequest(`path: "${path}" is not a valid document path`);
  return clean;
}

export interface CompileMetadata {
  config: Record<string, unknown>;
  parameters: string[];
  errors: { message: string; code: string; start?: unknown; end?: unknown }[];
}

const compiled = new Map<string, Promise<CompileMetadata>>();
const compiledLimit = 1_000;

/** PromptL compile metadata (config, parameters, errors), kept per content: scanning costs milliseconds. */
export function compileMetadata(content: string): Promise<CompileMetadata> {
  const key = sha256Hex(content);
  let metadata = compiled.get(key);
  if (!metadata) {
    metadata = scan({ prompt: content }).then((scanned) => ({
      config: scanned.config as Record<string, unknown>,
      parameters: [...scanned.parameters],
      errors: scanned.errors.map((error) => ({ message: error.message, code: error.code, start: error.start, end: error.end })),
    }));
    if (compiled.size >= compiledLimit) compiled.delete(compiled.keys().next().value!);
    compiled.set(key, metadata);
  }
  return metadata;
}

export const compileError = (path: string, errors: { message: string }[], status = 400) =>
  new GatewayError(status, "DocumentRunError", "chain_compile_error", `Prompt "${path}" does not compile: ${errors[0]!.message}`, { errors });

/** Prompts of a version; only drafts change, unless `force` allows changing live. */
export class PromptsService {
  constructor(
    private sql: Sql,
    private versions: VersionsService,
    private providers: ProviderResolver,
  ) {}

  async present(version: VersionRef, row: DocumentRow): Promise<Prompt> {
    const { config, parameters } = await compileMetadata(row.content);
    const providerName = typeof config.provider === "string" ? config.provider : null;
    const provider = providerName ? (this.providers.kindOf(providerName) ?? undefined) : undefined;
    return {
      versionUuid: version.uuid,
      uuid: row.document_uuid,
      path: row.path,
      content: row.content,
      contentHash: row.content_hash,
      config,
      parameters: Object.fromEntries(parameters.map((name) => [name, { type: "text" as const }])),
      ...(provider ? { provider } : {}),
    };
  }

  async list(organizationId: string, projectId: string, versionUuid: string): Promise<Prompt[]> {
    const version = await this.versions.resolve(this.sql, organizationId, projectId, versionUuid);
    const rows = await this.sql<DocumentRow[]>`SELECT * FROM gateway_documents WHERE version_id = ${version.rowId} AND deleted_at IS NULL ORDER BY path`;
    return Promise.all(rows.map((row) => this.present(version, row)));
  }

  async get(organizationId: string, projectId: string, versionUuid: string, path: string): Promise<Prompt> {
    const version = await this.versions.resolve(this.sql, organizationId, projectId, versionUuid);
    return this.present(version, await this.find(this.sql, version, checkPath(path)));
  }

  /** The document row at a path of a version; 404 when absent or deleted. */
  async find(sql: Queryable, version: VersionRef, path: string): Promise<DocumentRow> {
    const [row] = await sql<DocumentRow[]>`SELECT * FROM gateway_documents WHERE version_id = ${version.rowId} AND path = ${path} AND deleted_at IS NULL`;
    if (!row) throw notFound(`Document "${path}"`);
    return row;
  }

  async getOrCreate(organizationId: string, projectId: string, versionUuid: string, path: string, prompt = ""): Promise<Prompt> {
    const clean = checkPath(path);
    return this.sql.begin(async (tx) => {
      const version = await this.versions.resolve(tx, organizationId, projectId, versionUuid);
      const [existing] = await tx<DocumentRow[]>`SELECT * FROM gateway_documents WHERE version_id = ${version.rowId} AND path = ${clean} AND deleted_at IS NULL`;
      if (existing) return this.present(version, existing);
      return this.present(version, await this.write(tx, version, clean, prompt, { create: true, force: false }));
    });
  }

  /** `create` refuses an existing path (409); otherwise it creates or updates. */
  async save(organizationId: string, projectId: string, versionUuid: string, body: { path: string; prompt: string; force?: boolean }, create: boolean): Promise<Prompt> {
    const clean = checkPath(body.path);
    return this.sql.begin(async (tx) => {
      const version = await this.versions.resolve(tx, organizationId, projectId, versionUuid);
      if (create) {
        const [existing] = await tx`SELECT 1 FROM gateway_documents WHERE version_id = ${version.rowId} AND path = ${clean} AND deleted_at IS NULL`;
        if (existing) throw new GatewayError(409, "ConflictError", "ConflictError", `A document already exists at "${clean}"`);
      }
      return this.present(version, await this.write(tx, version, clean, body.prompt, { create, force: body.force === true }));
    });
  }

  /** Soft delete in a draft; the row stays, so reverting the draft restores it. */
  async remove(organizationId: string, projectId: string, versionUuid: string, path: string): Promise<void> {
    const clean = checkPath(path);
    const version = await this.versions.resolve(this.sql, organizationId, projectId, versionUuid);
    this.checkWritable(version, false);
    const result = await this.sql`UPDATE gateway_documents SET deleted_at = now(), updated_at = now() WHERE version_id = ${version.rowId} AND path = ${clean} AND deleted_at IS NULL`;
    if (result.count === 0) throw notFound(`Document "${clean}"`);
  }

  /** Undoes a draft's soft deletes. */
  async restore(organizationId: string, projectId: string, versionUuid: string, path: string): Promise<Prompt> {
    const clean = checkPath(path);
    const version = await this.versions.resolve(this.sql, organizationId, projectId, versionUuid);
    this.checkWritable(version, false);
    const [row] = await this.sql<DocumentRow[]>`UPDATE gateway_documents SET deleted_at = NULL, updated_at = now() WHERE version_id = ${version.rowId} AND path = ${clean} AND deleted_at IS NOT NULL RETURNING *`;
    if (!row) throw notFound(`Deleted document "${clean}"`);
    return this.present(version, row);
  }

  /** A new version from `base` with the changes applied, published as the new live version. */
  async push(organizationId: string, projectId: string, baseUuid: string, changes: PushChange[], userId: string | null): Promise<{ commitUuid: string }> {
    if (!Array.isArray(changes)) throw badRequest("changes: must be an array");
    return this.sql.begin(async (tx) => {
      const base = await this.versions.resolve(tx, organizationId, projectId, baseUuid);
      const draft = await this.versions.createDraft(tx, base.project, "Push", userId);
      for (const change of changes) {
        const path = checkPath(change.path);
        if (change.status === "deleted") await tx`DELETE FROM gateway_documents WHERE version_id = ${draft.rowId} AND path = ${path}`;
        else if (change.status === "added" || change.status === "modified") {
          if (typeof change.content !== "string") throw badRequest(`changes: "${path}" needs content`);
          await this.write(tx, draft, path, change.content, { create: true, force: false });
        } else if (change.status !== "unchanged") throw badRequest(`changes: unknown status "${String(change.status)}"`);
      }
      const published = await this.versions.publishIn(tx, draft, { title: `Push to ${base.version === null ? base.title : `version ${base.version}`}` });
      return { commitUuid: published.uuid };
    });
  }

  private checkWritable(version: VersionRef, force: boolean) {
    if (version.mergedAt && !force) {
      throw new GatewayError(400, "BadRequestError", "BadRequestError", `Version ${version.uuid} is live: only drafts can be changed (send force: true to change a live version)`);
    }
  }

  private async write(tx: Queryable, version: VersionRef, path: string, prompt: unknown, options: { create: boolean; force: boolean }): Promise<DocumentRow> {
    if (typeof prompt !== "string") throw badRequest("prompt: must be a string");
    this.checkWritable(version, options.force);
    const { errors } = await compileMetadata(prompt);
    if (errors.length) throw compileError(path, errors);
    const [row] = await tx<DocumentRow[]>`
      INSERT INTO gateway_documents (version_id, path, document_uuid, content, content_hash)
      VALUES (${version.rowId}, ${path}, ${crypto.randomUUID()}, ${prompt}, ${sha256Hex(prompt)})
      ON CONFLICT (version_id, path) DO UPDATE SET content = excluded.content, content_hash = excluded.content_hash, deleted_at = NULL, updated_at = now()
      RETURNING *`;
    return row!;
  }
}

