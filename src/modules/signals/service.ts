import type { Context } from "../../context";
import type { Queryable } from "../../db/postgres";
import { badRequest, notFound } from "../../lib/errors";
import { decodeCursor, encodeCursor, pageLimit, type Page } from "../../lib/pagination";
import { QueryParams } from "../traces/params";
import type { ProjectRef } from "../traces/service";
import { TracesService } from "../traces/service";
import { TraceSearch } from "../traces/search";
import type { Trace } from "../traces/model";
import { alignmentMetrics } from "./alignment";
import { contentWords } from "./embedding";
import { scoreEvidenceOf } from "./flaggers";
import type { Evaluation, ListSignalsQuery, SessionSignal, Signal, SignalDetail, UpdateSignalBody } from "./model";
import { signalStates, stateRank } from "./states";

const day = 86_400_000;
const trendDays = 14;

export interface SignalRow {
  id: string;
  organization_id: string;
  project_id: string;
  slug: string;
  name: string;
  description: string;
  source: "annotation" | "flagger" | "custom";
  priority: string | null;
  visible_at: Date | null;
  resolved_at: Date | null;
  ignored_at: Date | null;
  muted_at: Date | null;
  regressed_at: Date | null;
  escalating_since: Date | null;
  keep_monitoring: boolean;
  flaggers: string[];
  feedback: { value: number; passed: boolean; feedback: string } | null;
  created_at: Date;
  updated_at: Date;
}

interface Stats {
  occurrences: number;
  first: Date | null;
  last: Date | null;
  sessions: number;
}

const iso = (date: Date | null) => (date ? date.toISOString() : null);

/** Counted occurrences: published, live scores linked to a signal. */
const occurrenceScores = (sql: Queryable) => sql`deleted_at IS NULL AND drafted_at IS NULL AND signal_id IS NOT NULL`;

function timeRange(fromIso: string | undefined, toIso: string | undefined, defaultDays: number) {
  const to = toIso ? new Date(toIso) : new Date();
  const from = fromIso ? new Date(fromIso) : new Date(to.getTime() - defaultDays * day);
  if (Number.isNaN(to.getTime())) throw badRequest("toIso: must be an ISO-8601 timestamp");
  if (Number.isNaN(from.getTime())) throw badRequest("fromIso: must be an ISO-8601 timestamp");
  if (from > to) throw badRequest("fromIso: must not be after toIso");
  return { from, to };
}

const utcDay = (date: Date) => date.toISOString().slice(0, 10);

function lifecycleFields(row: SignalRow) {
  return {
    id: row.id,
    organizationId: row.organization_id,
    projectId: row.project_id,
    slug: row.slug,
    name: row.name,
    description: row.description,
    source: row.source,
    scoreEvidence: scoreEvidenceOf(row.flaggers),
    states: signalStates(row),
    resolvedAt: iso(row.resolved_at),
    ignoredAt: iso(row.ignored_at),
    regressedAt: iso(row.regressed_at),
    mutedAt: iso(row.muted_at),
    createdAt: row.created_at.toISOString(),
    updatedAt: row.updated_at.toISOString(),
  };
}

/** Signals: reads and lifecycle (the routes' logic; discovery, detectors and alignment live beside it). */
export class SignalsService {
  private traceReader: TracesService;

  constructor(private ctx: Context) {
    this.traceReader = new TracesService(ctx.ch, new TraceSearch(null, ctx.log));
  }

  private get sql() {
    return this.ctx.sql;
  }

  async find(project: ProjectRef, slugOrId: string): Promise<SignalRow> {
    const [row] = await this.sql<SignalRow[]>`
      SELECT * FROM signals
      WHERE project_id = ${project.id} AND deleted_at IS NULL AND visible_at IS NOT NULL AND (slug = ${slugOrId} OR id = ${slugOrId})
      ORDER BY id = ${slugOrId} DESC LIMIT 1`;
    if (!row) throw notFound("Signal");
    return row;
  }

  async list(project: ProjectRef, query: ListSignalsQuery): Promise<Page<Signal>> {
    const limit = pageLimit(query.limit);
    const offset = query.cursor ? Number(decodeCursor(query.cursor, 1)[0]) : 0;
    if (!Number.isInteger(offset) || offset < 0) throw badRequest("cursor: is not a cursor returned by this list");
    const { from, to } = timeRange(query.fromIso, query.toIso, 6);
    const words = query.query ? contentWords(query.query) : [];
    const all = await this.listRows(project, from, to, query.lifecycleGroup, words);
    const now = Date.now();
    const direction = query.sortDirection === "asc" ? 1 : -1;
    const sortKey = (row: (typeof all)[number]): number =>
      query.sortBy === "occurrences" ? row.occurrences : query.sortBy === "state" ? stateRank(row, now) : (row.last_seen ?? row.created_at).getTime();
    all.sort((a, b) => direction * (sortKey(a) - sortKey(b)) || (a.id < b.id ? -1 : 1));
    const page = all.slice(offset, offset + limit);
    const totalSessions = page.length ? await this.sessionCount(project, from, to) : 0;
    const [trends, tags] = await Promise.all([this.trends(project, page.map((row) => row.id)), this.tags(project, page.map((row) => row.id), from, to)]);
    const items = page.map(
      (row): Signal => ({
        ...lifecycleFields(row),
        trend: trends.get(row.id) ?? emptyTrend(),
        tags: tags.get(row.id) ?? [],
        firstSeenAt: (row.first_seen ?? row.created_at).toISOString(),
        lastSeenAt: (row.last_seen ?? row.created_at).toISOString(),
        occurrences: row.occurrences,
        affectedSessionsPercent: totalSessions ? Math.min(1, row.sessions / totalSessions) : 0,
      }),
    );
    const hasMore = offset + limit < all.length;
    return { items, nextCursor: hasMore ? encodeCursor([String(offset + limit)]) : null, hasMore };
  }

  private async listRows(project: ProjectRef, from: Date, to: Date, group: "active" | "archived" | undefined, words: string[]) {
    const wordFilter = words.reduce((filter, word) => this.sql`${filter} AND (s.name || ' ' || s.description) ILIKE ${"%" + word + "%"}`, this.sql``);
    return this.sql<(SignalRow & { occurrences: number; first_seen: Date | null; last_seen: Date | null; sessions: number })[]>`
      WITH stats AS (
        SELECT signal_id, count(*)::int AS occurrences, min(created_at) AS first_seen, max(created_at) AS last_seen,
          count(DISTINCT session_id)::int AS sessions
        FROM scores
        WHERE project_id = ${project.id} AND ${occurrenceScores(this.sql)} AND created_at BETWEEN ${from} AND ${to}
        GROUP BY signal_id)
      SELECT s.*, coalesce(st.occurrences, 0) AS occurrences, st.first_seen, st.last_seen, coalesce(st.sessions, 0) AS sessions
      FROM signals s LEFT JOIN stats st ON st.signal_id = s.id
      WHERE s.project_id = ${project.id} AND s.deleted_at IS NULL AND s.visible_at IS NOT NULL
        AND (st.signal_id IS NOT NULL OR s.created_at BETWEEN ${from} AND ${to})
        ${group === "active" ? this.sql`AND s.resolved_at IS NULL AND s.ignored_at IS NULL` : this.sql``}
        ${group === "archived" ? this.sql`AND (s.resolved_at IS NOT NULL OR s.ignored_at IS NOT NULL)` : this.sql``}
        ${wordFilter}`;
  }

  async get(project: ProjectRef, slug: string): Promise<SignalDetail> {
    const row = await this.find(project, slug);
    const [stats] = await this.sql<Stats[]>`
      SELECT count(*)::int AS occurrences, min(created_at) AS first, max(created_at) AS last, count(DISTINCT session_id)::int AS sessions
      FROM scores WHERE signal_id = ${row.id} AND project_id = ${project.id} AND ${occurrenceScores(this.sql)}`;
    const epoch = new Date(0);
    const [totalSessions, trends, tags, evaluations] = await Promise.all([
      this.sessionCount(project, epoch, new Date()),
      this.trends(project, [row.id]),
      this.tags(project, [row.id], epoch, new Date()),
      this.evaluations(row.id),
    ]);
    return {
      ...lifecycleFields(row),
      trend: trends.get(row.id) ?? emptyTrend(),
      tags: tags.get(row.id) ?? [],
      firstSeenAt: iso(stats!.first),
      lastSeenAt: iso(stats!.last),
      occurrences: stats!.occurrences,
      affectedSessionsPercent: totalSessions ? Math.min(1, stats!.sessions / totalSessions) : 0,
      evaluations,
      monitoringState: { kind: row.source === "flagger" ? "automatic" : "idle" },
      feedback: row.feedback,
    };
  }

  /** Active evaluations of a signal, with their alignment against human annotations. */
  async evaluations(signalId: string): Promise<Evaluation[]> {
    const rows = await this.sql<
      {
        id: string;
        name: string;
        description: string;
        sampling: number;
        aligned_at: Date | null;
        archived_at: Date | null;
        deleted_at: Date | null;
        created_at: Date;
        updated_at: Date;
        true_positives: number | null;
        false_positives: number | null;
        true_negatives: number | null;
        false_negatives: number | null;
      }[]
    >`
      SELECT e.*, a.true_positives, a.false_positives, a.true_negatives, a.false_negatives
      FROM evaluations e LEFT JOIN evaluation_alignment a ON a.evaluation_id = e.id
      WHERE e.signal_id = ${signalId} AND e.archived_at IS NULL AND e.deleted_at IS NULL
      ORDER BY e.created_at`;
    return rows.map((row) => ({
      id: row.id,
      name: row.name,
      description: row.description,
      alignedAt: iso(row.aligned_at),
      archivedAt: iso(row.archived_at),
      deletedAt: iso(row.deleted_at),
      createdAt: row.created_at.toISOString(),
      updatedAt: row.updated_at.toISOString(),
      sampling: row.sampling,
      alignment:
        row.true_positives === null || row.true_positives + row.false_positives! + row.true_negatives! + row.false_negatives! === 0
          ? null
          : alignmentMetrics({ tp: row.true_positives, fp: row.false_positives!, tn: row.true_negatives!, fn: row.false_negatives! }),
    }));
  }

  async update(project: ProjectRef, slug: string, body: UpdateSignalBody) {
    const row = await this.find(project, slug);
    const name = body.name ?? row.name;
    const description = body.description ?? row.description;
    let changed = name !== row.name || description !== row.description;
    await this.sql.begin(async (tx) => {
      if (changed) await tx`UPDATE signals SET name = ${name}, description = ${description}, named_at = now(), updated_at = now() WHERE id = ${row.id}`;
      if (body.filters !== undefined) {
        const filters = body.filters === null ? null : tx.json(body.filters as never);
        const result = await tx`
          UPDATE evaluations SET filters = ${filters}, updated_at = now()
          WHERE signal_id = ${row.id} AND archived_at IS NULL AND filters IS DISTINCT FROM ${filters}::jsonb`;
        if (result.count > 0) changed = true;
      }
    });
    return { id: row.id, slug: row.slug, changed };
  }

  async delete(project: ProjectRef, slug: string) {
    const row = await this.find(project, slug);
    await this.sql.begin(async (tx) => {
      await tx`UPDATE signals SET deleted_at = now(), updated_at = now() WHERE id = ${row.id}`;
      await tx`UPDATE evaluations SET deleted_at = now(), updated_at = now() WHERE signal_id = ${row.id} AND deleted_at IS NULL`;
    });
  }

  /** resolve / unresolve / ignore / unignore / mute / unmute of several signals; idempotent. */
  async lifecycle(project: ProjectRef, signalIds: string[], action: LifecycleAction, keepMonitoring?: boolean) {
    const rows = await this.sql<SignalRow[]>`
      SELECT * FROM signals WHERE project_id = ${project.id} AND deleted_at IS NULL AND id IN ${this.sql(signalIds)}`;
    const byId = new Map(rows.map((row) => [row.id, row]));
    const missing = signalIds.find((id) => !byId.has(id));
    if (missing) throw notFound(`Signal ${missing}`);
    const items = [];
    for (const id of signalIds) {
      const row = byId.get(id)!;
      const next = lifecycleChange(row, action, new Date());
      const changed = next !== null;
      let updated = row;
      if (next) {
        [updated] = await this.sql.begin(async (tx) => {
          const result = await tx<SignalRow[]>`
            UPDATE signals SET resolved_at = ${next.resolved_at}, ignored_at = ${next.ignored_at}, muted_at = ${next.muted_at},
              regressed_at = ${next.regressed_at}, keep_monitoring = ${action === "resolve" && keepMonitoring !== undefined ? keepMonitoring : row.keep_monitoring},
              updated_at = now()
            WHERE id = ${id} RETURNING *`;
          if (action === "resolve" && keepMonitoring === false) {
            await tx`UPDATE evaluations SET archived_at = now(), updated_at = now() WHERE signal_id = ${id} AND archived_at IS NULL`;
          }
          return result;
        });
      }
      items.push({
        signalId: id,
        resolvedAt: iso(updated!.resolved_at),
        ignoredAt: iso(updated!.ignored_at),
        regressedAt: iso(updated!.regressed_at),
        mutedAt: iso(updated!.muted_at),
        updatedAt: updated!.updated_at.toISOString(),
        changed,
      });
    }
    return { items };
  }

  async analytics(project: ProjectRef, fromIso?: string, toIso?: string) {
    const { from, to } = timeRange(fromIso, toIso, 7);
    const signals = await this.sql<SignalRow[]>`
      SELECT * FROM signals WHERE project_id = ${project.id} AND deleted_at IS NULL AND visible_at IS NOT NULL`;
    const counts = { ongoing: 0, new: 0, escalating: 0, resolved: 0, ignored: 0 };
    for (const signal of signals) for (const state of signalStates(signal)) if (state in counts) counts[state as keyof typeof counts] += 1;
    const buckets = await this.sql<{ bucket: Date; value: number }[]>`
      SELECT date_trunc('day', s.created_at, 'UTC') AS bucket, count(*)::int AS value
      FROM scores s JOIN signals g ON g.id = s.signal_id AND g.visible_at IS NOT NULL AND g.deleted_at IS NULL
      WHERE s.project_id = ${project.id} AND s.deleted_at IS NULL AND s.drafted_at IS NULL AND s.created_at BETWEEN ${from} AND ${to}
      GROUP BY 1 ORDER BY 1`;
    const byDay = new Map(buckets.map((bucket) => [bucket.bucket.getTime(), bucket.value]));
    const allBuckets = [];
    for (let t = Date.UTC(from.getUTCFullYear(), from.getUTCMonth(), from.getUTCDate()); t <= to.getTime(); t += day) {
      allBuckets.push({ bucket: new Date(t).toISOString(), value: byDay.get(t) ?? 0 });
    }
    return {
      ongoing: { total: counts.ongoing },
      new: { total: counts.new },
      escalating: { total: counts.escalating },
      resolved: { total: counts.resolved },
      ignored: { total: counts.ignored },
      occurrences: { total: allBuckets.reduce((sum, bucket) => sum + bucket.value, 0), buckets: allBuckets },
    };
  }

  /** 12-hour UTC-aligned buckets over the range, empty ones included. */
  async histogram(project: ProjectRef, slug: string, fromIso?: string, toIso?: string) {
    const row = await this.find(project, slug);
    const { from, to } = timeRange(fromIso, toIso, 14);
    const half = day / 2;
    const counts = await this.sql<{ bucket: string; count: number }[]>`
      SELECT (floor(extract(epoch FROM created_at) * 1000 / ${half}) * ${half})::bigint::text AS bucket, count(*)::int AS count
      FROM scores WHERE signal_id = ${row.id} AND project_id = ${project.id} AND deleted_at IS NULL AND drafted_at IS NULL
        AND created_at BETWEEN ${from} AND ${to}
      GROUP BY 1`;
    const byBucket = new Map(counts.map((entry) => [Number(entry.bucket), entry.count]));
    const buckets = [];
    for (let t = Math.floor(from.getTime() / half) * half; t <= to.getTime(); t += half) buckets.push({ bucket: new Date(t).toISOString(), count: byBucket.get(t) ?? 0 });
    return { buckets };
  }

  /** Traces with an occurrence of the signal, most recent occurrence first. */
  async traces(project: ProjectRef, slug: string, query: { cursor?: string; limit?: number }): Promise<Page<Trace>> {
    const row = await this.find(project, slug);
    const limit = pageLimit(query.limit);
    const after = query.cursor ? decodeCursor(query.cursor, 2) : null;
    const ids = await this.sql<{ trace_id: string; last: Date; last_micros: string }[]>`
      SELECT trace_id, max(created_at) AS last, (extract(epoch FROM max(created_at)) * 1000000)::bigint::text AS last_micros
      FROM scores WHERE signal_id = ${row.id} AND project_id = ${project.id} AND deleted_at IS NULL AND drafted_at IS NULL AND trace_id IS NOT NULL
      GROUP BY trace_id
      ${after ? this.sql`HAVING ((extract(epoch FROM max(created_at)) * 1000000)::bigint, trace_id) < (${after[0]!}::bigint, ${after[1]!})` : this.sql``}
      ORDER BY max(created_at) DESC, trace_id DESC LIMIT ${limit + 1}`;
    const pageIds = ids.slice(0, limit);
    const items = await this.traceReader.traceItems(project, pageIds.map((entry) => entry.trace_id));
    const last = pageIds.at(-1);
    const hasMore = ids.length > limit;
    return { items, nextCursor: hasMore && last ? encodeCursor([last.last_micros, last.trace_id]) : null, hasMore };
  }

  async submitFeedback(project: ProjectRef, slug: string, body: { passed: boolean; feedback?: string; value?: number; ignore?: boolean }) {
    const row = await this.find(project, slug);
    if (!body.passed && !body.feedback?.trim()) throw badRequest("feedback: is required when passed is false");
    const verdict = { value: body.value ?? (body.passed ? 1 : 0), passed: body.passed, feedback: body.feedback ?? "" };
    await this.sql`UPDATE signals SET feedback = ${this.sql.json(verdict)}, updated_at = now() WHERE id = ${row.id}`;
    if (body.ignore) await this.lifecycle(project, [row.id], "ignore");
    return { ...verdict, ignored: body.ignore === true };
  }

  /** Signals that occurred in a session, most recent occurrence first. */
  async sessionSignals(project: ProjectRef, sessionId: string, slug?: string): Promise<SessionSignal[]> {
    const rows = await this.sql<(SignalRow & { occurrences: number; first_seen: Date; last_seen: Date; trace_ids: string[] })[]>`
      SELECT g.*, count(*)::int AS occurrences, min(s.created_at) AS first_seen, max(s.created_at) AS last_seen,
        array_remove(array_agg(DISTINCT s.trace_id), NULL) AS trace_ids
      FROM scores s JOIN signals g ON g.id = s.signal_id
      WHERE s.project_id = ${project.id} AND s.session_id = ${sessionId} AND s.deleted_at IS NULL AND s.drafted_at IS NULL
        AND g.deleted_at IS NULL AND g.visible_at IS NOT NULL ${slug ? this.sql`AND g.slug = ${slug}` : this.sql``}
      GROUP BY g.id ORDER BY max(s.created_at) DESC`;
    return rows.map((row) => ({
      ...lifecycleFields(row),
      occurrences: row.occurrences,
      firstSeenAt: row.first_seen.toISOString(),
      lastSeenAt: row.last_seen.toISOString(),
      traceIds: row.trace_ids,
    }));
  }

  /** Signals on a user's traces (the user id of the traces in ClickHouse), most recent first. */
  async userSignals(project: ProjectRef, userId: string, limit = 50) {
    const result = await this.ctx.ch.client.query({
      query: `SELECT DISTINCT trace_id FROM ${this.ctx.ch.database}.traces
        WHERE organization_id = {organizationId:String} AND project_id = {projectId:String} AND user_id = {userId:String} LIMIT 100000`,
      query_params: { organizationId: project.organizationId, projectId: project.id, userId },
      format: "JSONEachRow",
    });
    const traceIds = (await result.json<{ trace_id: string }>()).map((row) => row.trace_id);
    if (traceIds.length === 0) return { items: [] };
    const rows = await this.sql<(SignalRow & { occurrences: number; traces: number; first_seen: Date; last_seen: Date })[]>`
      SELECT g.*, count(*)::int AS occurrences, count(DISTINCT s.trace_id)::int AS traces, min(s.created_at) AS first_seen, max(s.created_at) AS last_seen
      FROM scores s JOIN signals g ON g.id = s.signal_id
      WHERE s.project_id = ${project.id} AND s.trace_id IN ${this.sql(traceIds)} AND s.deleted_at IS NULL AND s.drafted_at IS NULL
        AND g.deleted_at IS NULL AND g.visible_at IS NOT NULL
      GROUP BY g.id ORDER BY max(s.created_at) DESC LIMIT ${Math.min(Math.max(1, limit), 200)}`;
    return {
      items: rows.map((row) => ({
        signalId: row.id,
        name: row.name,
        description: row.description,
        states: signalStates(row),
        priority: row.priority,
        occurrences: row.occurrences,
        affectedTraces: row.traces,
        firstSeenAt: row.first_seen.toISOString(),
        lastSeenAt: row.last_seen.toISOString(),
      })),
    };
  }

  /** Daily counts of the last 14 UTC days, today included. */
  private async trends(project: ProjectRef, signalIds: string[]): Promise<Map<string, { bucket: string; count: number }[]>> {
    const trends = new Map<string, { bucket: string; count: number }[]>();
    if (signalIds.length === 0) return trends;
    const since = new Date(Date.parse(utcDay(new Date())) - (trendDays - 1) * day);
    const rows = await this.sql<{ signal_id: string; day: string; count: number }[]>`
      SELECT signal_id, to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD') AS day, count(*)::int AS count
      FROM scores WHERE project_id = ${project.id} AND signal_id IN ${this.sql(signalIds)} AND deleted_at IS NULL AND drafted_at IS NULL
        AND created_at >= ${since}
      GROUP BY 1, 2`;
    for (const id of signalIds) {
      const counts = new Map(rows.filter((row) => row.signal_id === id).map((row) => [row.day, row.count]));
      trends.set(
        id,
        Array.from({ length: trendDays }, (_, i) => {
          const bucket = utcDay(new Date(since.getTime() + i * day));
          return { bucket, count: counts.get(bucket) ?? 0 };
        }),
      );
    }
    return trends;
  }

  /** Tags of the traces where each signal occurred in the range. */
  private async tags(project: ProjectRef, signalIds: string[], from: Date, to: Date): Promise<Map<string, string[]>> {
    const tags = new Map<string, string[]>();
    if (signalIds.length === 0) return tags;
    const pairs = await this.sql<{ signal_id: string; trace_id: string }[]>`
      SELECT DISTINCT signal_id, trace_id FROM scores
      WHERE project_id = ${project.id} AND signal_id IN ${this.sql(signalIds)} AND trace_id IS NOT NULL AND deleted_at IS NULL AND drafted_at IS NULL
        AND created_at BETWEEN ${from} AND ${to}
      LIMIT 20000`;
    if (pairs.length === 0) return tags;
    const params = new QueryParams();
    const result = await this.ctx.ch.client.query({
      query: `SELECT trace_id, groupUniqArrayArray(tags) AS tags FROM ${this.ctx.ch.database}.traces
        WHERE organization_id = ${params.bind(project.organizationId, "String")} AND project_id = ${params.bind(project.id, "String")}
          AND trace_id IN ${params.bind([...new Set(pairs.map((pair) => pair.trace_id))], "Array(String)")}
        GROUP BY trace_id`,
      query_params: params.values,
      format: "JSONEachRow",
    });
    const byTrace = new Map((await result.json<{ trace_id: string; tags: string[] }>()).map((row) => [row.trace_id, row.tags]));
    for (const pair of pairs) {
      const set = new Set(tags.get(pair.signal_id) ?? []);
      for (const tag of byTrace.get(pair.trace_id) ?? []) set.add(tag);
      tags.set(pair.signal_id, [...set].sort());
    }
    return tags;
  }

  /** Sessions of the project with a trace in the range. */
  private async sessionCount(project: ProjectRef, from: Date, to: Date): Promise<number> {
    const params = new QueryParams();
    const result = await this.ctx.ch.client.query({
      query: `SELECT uniqExact(session_id) AS sessions FROM ${this.ctx.ch.database}.traces
        WHERE organization_id = ${params.bind(project.organizationId, "String")} AND project_id = ${params.bind(project.id, "String")}
          AND session_id IS NOT NULL AND session_id != ''
          AND start_time <= ${params.bind(to.getTime() / 1000, "Float64")} AND end_time >= ${params.bind(from.getTime() / 1000, "Float64")}`,
      query_params: params.values,
      format: "JSONEachRow",
    });
    const [row] = await result.json<{ sessions: string | number }>();
    return Number(row?.sessions ?? 0);
  }
}

export type LifecycleAction = "resolve" | "unresolve" | "ignore" | "unignore" | "mute" | "unmute";

type LifecycleTimes = Pick<SignalRow, "resolved_at" | "ignored_at" | "muted_at" | "regressed_at">;

/** The lifecycle columns after an action, or null when the signal is already in that state. */
function lifecycleChange(row: LifecycleTimes, action: LifecycleAction, now: Date): LifecycleTimes | null {
  const next = { resolved_at: row.resolved_at, ignored_at: row.ignored_at, muted_at: row.muted_at, regressed_at: row.regressed_at };
  if (action === "resolve") {
    if (row.resolved_at) return null;
    // A resolution closes the regression it answered.
    return { ...next, resolved_at: now, regressed_at: null };
  }
  if (action === "unresolve") return row.resolved_at ? { ...next, resolved_at: null } : null;
  // Ignoring a signal also mutes it (SignalLifecycleItem.mutedAt).
  if (action === "ignore") return row.ignored_at ? null : { ...next, ignored_at: now, muted_at: row.muted_at ?? now };
  if (action === "unignore") return row.ignored_at ? { ...next, ignored_at: null } : null;
  if (action === "mute") return row.muted_at ? null : { ...next, muted_at: now };
  return row.muted_at ? { ...next, muted_at: null } : null;
}

const emptyTrend = () => {
  const since = Date.parse(utcDay(new Date())) - (trendDays - 1) * day;
  return Array.from({ length: trendDays }, (_, i) => ({ bucket: utcDay(new Date(since + i * day)), count: 0 }));
};
