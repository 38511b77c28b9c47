import type { ClickHouseStore } from "../../db/clickhouse";
import { compileTraceFilters, validateTraceFilters, type FilterSet, type FilterSqlContext } from "../traces/filters";
import { QueryParams } from "../traces/params";
import { bindScope, traceRelationSql, type TraceColumn, type TraceScope } from "../traces/relation";
import type { TraceSearch } from "../traces/search";
import type { ProjectRef } from "../traces/service";
import type { MonitorMetric } from "./model";
import { compileSpanFilters, validateSpanFilters } from "./span-filters";

/**
 * Measuring monitor targets in ClickHouse, many monitors of a project per query: each monitor's
 * filters become one condition, and its metric an `-If` aggregate under it. Traces are read from
 * the trace relation (roll-up), spans (tool targets) from `spans`, sessions from the `sessions`
 * roll-up joined to their traces: a session is in a monitor's stream when one of its traces meets
 * the monitor's (trace) filters, and it is measured as a whole, placed in time by its last activity.
 */

export type Stream = "traces" | "spans" | "sessions";

export interface Measure {
  key: string;
  stream: Stream;
  filters: FilterSet;
  query: string | null;
  metric: MonitorMetric;
}

/** The value of a metric over [from, to) (epoch ms); null when nothing was measured (no rows for an average). */
export interface WindowRequest {
  key: string;
  from: number;
  to: number;
}

interface StreamSql {
  time: string;
  error: string;
  cacheRead: string;
  cacheDenominator: string;
  duration: string;
  cost: string;
  tokens: string;
}

const streams: Record<Stream, StreamSql> = {
  traces: {
    time: "start_time",
    error: "error_count > 0",
    cacheRead: "tokens_cache_read",
    cacheDenominator: "(tokens_input + tokens_cache_read + tokens_cache_create)",
    duration: "(duration_ns / 1e6)",
    cost: "cost_total_microcents",
    tokens: "tokens_total",
  },
  spans: {
    time: "start_time",
    error: "status_code = 'error'",
    cacheRead: "tokens_cache_read",
    cacheDenominator: "(tokens_input + tokens_cache_read + tokens_cache_create)",
    duration: "(duration_ns / 1e6)",
    cost: "cost_total_microcents",
    tokens: "(tokens_input + tokens_output + tokens_cache_read + tokens_cache_create + tokens_reasoning)",
  },
  sessions: {
    time: "end_time",
    error: "error_count > 0",
    cacheRead: "tokens_cache_read",
    cacheDenominator: "(tokens_input + tokens_cache_read + tokens_cache_create)",
    duration: "duration_ms",
    cost: "cost_total_microcents",
    tokens: "tokens_total",
  },
};

/** What the sessions relation reads of each session's traces: the cache tokens the roll-up does not keep, and its latest trace. */
const sessionTraceColumns: TraceColumn[] = ["session_id", "end_time", "tokens_input", "tokens_cache_read", "tokens_cache_create"];

/** Relation columns a metric reads on the traces stream. */
function metricColumns(metric: MonitorMetric): TraceColumn[] {
  switch (metric.kind) {
    case "count":
      return [];
    case "errorRate":
      return ["error_count"];
    case "cacheHitRate":
      return ["tokens_input", "tokens_cache_read", "tokens_cache_create"];
    default:
      return [({ duration: "duration_ns", cost: "cost_total_microcents", tokens: "tokens_total" } as const)[metric.field]];
  }
}

/** SQL of the metric over the rows meeting `condition`, as a Nullable(Float64). */
export function metricSql(metric: MonitorMetric, stream: Stream, condition: string): string {
  const s = streams[stream];
  const none = `countIf(${condition}) = 0`;
  switch (metric.kind) {
    case "count":
      return `toFloat64(countIf(${condition}))`;
    case "errorRate":
      return `if(${none}, NULL, countIf(${s.error} AND ${condition}) / countIf(${condition}))`;
    case "cacheHitRate":
      return `if(sumIf(${s.cacheDenominator}, ${condition}) = 0, NULL, sumIf(${s.cacheRead}, ${condition}) / sumIf(${s.cacheDenominator}, ${condition}))`;
    default: {
      const value = `toFloat64(${s[metric.field]})`;
      const aggregate = metric.kind === "median" ? `quantileExactIf(0.5)(${value}, ${condition})` : `${metric.kind}If(${value}, ${condition})`;
      return metric.kind === "sum" ? `toFloat64(${aggregate})` : `if(${none}, NULL, toFloat64(${aggregate}))`;
    }
  }
}

const measuresPerQuery = 100;

const msParam = (params: QueryParams, ms: number) => `fromUnixTimestamp64Milli(${params.bind(Math.floor(ms), "Int64")}, 'UTC')`;

interface CompiledGroup {
  params: QueryParams;
  /** Per measure key: its condition over the rows of `from`. */
  conditions: Map<string, string>;
  /** FROM clause: the relation, `spans` or the sessions relation, scoped to the project and starting at `since`. */
  from: string;
}

export class Measurer {
  constructor(
    private readonly ch: ClickHouseStore,
    private readonly search: TraceSearch,
  ) {}

  private async rows<T>(query: string, params: QueryParams): Promise<T[]> {
    const result = await this.ch.client.query({ query, query_params: params.values, format: "JSONEachRow" });
    return result.json<T>();
  }

  /** The measures of one stream compiled over rows starting from `since` (epoch ms); `extra` adds trace relation columns. */
  private async compile(project: ProjectRef, stream: Stream, measures: Measure[], since: number, extra: TraceColumn[] = []): Promise<CompiledGroup> {
    const params = new QueryParams();
    const conditions = new Map<string, string>();
    if (stream === "spans") {
      for (const measure of measures) conditions.set(measure.key, `(${compileSpanFilters(validateSpanFilters(measure.filters), params)})`);
      const from = `${this.ch.database}.spans WHERE organization_id = ${params.bind(project.organizationId, "String")} AND project_id = ${params.bind(project.id, "String")}
        AND start_time >= ${msParam(params, since)}`;
      return { params, conditions, from };
    }
    const scope: TraceScope = bindScope(params, this.ch.database, project.organizationId, project.id);
    const sinceSql = msParam(params, since);
    const tenant = `organization_id = ${scope.organizationId} AND project_id = ${scope.projectId}`;
    // Sessions active since `since`, with every trace of theirs (some may have started before).
    const sessionIds = `(SELECT session_id FROM ${this.ch.database}.sessions WHERE ${tenant} AND end_time >= ${sinceSql})`;
    scope.traceIds =
      stream === "sessions"
        ? `(SELECT trace_id FROM ${this.ch.database}.traces WHERE ${tenant} AND session_id IN ${sessionIds})`
        : `(SELECT trace_id FROM ${this.ch.database}.traces WHERE ${tenant} AND start_time >= ${sinceSql})`;
    const columns = new Set<TraceColumn>(["start_time", ...extra, ...(stream === "sessions" ? sessionTraceColumns : [])]);
    const context: FilterSqlContext = {
      params,
      database: this.ch.database,
      organizationId: scope.organizationId,
      projectId: scope.projectId,
      spanScope: "1",
      percentile: (expression, percentileColumns, fraction, window) =>
        `(SELECT quantileExact(${params.bind(fraction, "Float64")})(${expression}) FROM ${traceRelationSql(percentileColumns, { database: this.ch.database, organizationId: scope.organizationId, projectId: scope.projectId })} WHERE ${window})`,
    };
    for (const measure of measures) {
      const compiled = compileTraceFilters(validateTraceFilters(measure.filters), context);
      for (const column of compiled.columns) columns.add(column);
      if (stream === "traces") for (const column of metricColumns(measure.metric)) columns.add(column);
      let condition = `(${compiled.where})`;
      if (measure.query) condition += ` AND trace_id IN (SELECT trace_id FROM ${await this.search.relevanceSql(measure.query, scope, params)})`;
      conditions.set(measure.key, condition);
    }
    if (stream === "traces") return { params, conditions, from: `${traceRelationSql(columns, scope)} WHERE start_time >= ${sinceSql}` };

    // Sessions: the roll-up merged per session, joined to its traces grouped per session, where
    // `h<i>` says whether a trace of the session meets the i-th measure's condition.
    const keys = [...conditions.keys()];
    const hits = keys.map((key, index) => `countIf(${conditions.get(key)}) > 0 AS h${index}`);
    const traces = `SELECT assumeNotNull(session_id) AS t_session, argMax(trace_id, end_time) AS t_trace, sum(tokens_input) AS t_input,
        sum(tokens_cache_read) AS t_cache_read, sum(tokens_cache_create) AS t_cache_create, ${hits.join(", ")}
      FROM ${traceRelationSql(columns, scope)} WHERE session_id IS NOT NULL GROUP BY t_session`;
    const sessions = `SELECT session_id AS s_session, min(start_time) AS s_start, max(end_time) AS s_end, sum(error_count) AS s_errors,
        sum(tokens_total) AS s_tokens, sum(cost_total_microcents) AS s_cost
      FROM ${this.ch.database}.sessions WHERE ${tenant} AND session_id IN ${sessionIds} GROUP BY s_session`;
    const relation = `(SELECT s_session AS session_id, t_trace AS trace_id, s_start AS start_time, s_end AS end_time,
        (toUnixTimestamp64Milli(s_end) - toUnixTimestamp64Milli(s_start)) AS duration_ms, s_errors AS error_count, s_tokens AS tokens_total,
        s_cost AS cost_total_microcents, t_input AS tokens_input, t_cache_read AS tokens_cache_read, t_cache_create AS tokens_cache_create,
        ${keys.map((_, index) => `h${index}`).join(", ")}
      FROM (${sessions}) AS s INNER JOIN (${traces}) AS t ON s.s_session = t.t_session)`;
    keys.forEach((key, index) => conditions.set(key, `h${index}`));
    return { params, conditions, from: `${relation} WHERE end_time >= ${sinceSql}` };
  }

  /** Measures by stream, in chunks that keep one statement's SQL well under ClickHouse's query size limit. */
  private static byStream<M extends Measure>(measures: M[]): [Stream, M[]][] {
    const groups = new Map<Stream, M[]>();
    for (const measure of measures) groups.set(measure.stream, [...(groups.get(measure.stream) ?? []), measure]);
    const chunks: [Stream, M[]][] = [];
    for (const [stream, group] of groups) {
      for (let start = 0; start < group.length; start += measuresPerQuery) chunks.push([stream, group.slice(start, start + measuresPerQuery)]);
    }
    return chunks;
  }

  /** Each requested window's metric value, keyed `key|index` by the request's index. */
  async windows(project: ProjectRef, measures: Measure[], requests: WindowRequest[]): Promise<Map<string, number | null>> {
    const values = new Map<string, number | null>();
    if (!requests.length) return values;
    const byKey = new Map(measures.map((measure) => [measure.key, measure]));
    for (const [stream, group] of Measurer.byStream(measures)) {
      const keys = new Set(group.map((measure) => measure.key));
      const mine = requests.map((request, index) => ({ request, index })).filter(({ request }) => keys.has(request.key));
      if (!mine.length) continue;
      const since = Math.min(...mine.map(({ request }) => request.from));
      const compiled = await this.compile(project, stream, group, since);
      const time = streams[stream].time;
      const columns = mine.map(({ request, index }) => {
        const window = `${compiled.conditions.get(request.key)} AND ${time} >= ${msParam(compiled.params, request.from)} AND ${time} < ${msParam(compiled.params, request.to)}`;
        return `${metricSql(byKey.get(request.key)!.metric, stream, window)} AS w${index}`;
      });
      const [row] = await this.rows<Record<string, number | null>>(`SELECT ${columns.join(", ")} FROM ${compiled.from}`, compiled.params);
      for (const { request, index } of mine) values.set(`${request.key}|${index}`, row?.[`w${index}`] ?? null);
    }
    return values;
  }

  /**
   * Hourly series ending at `now`: `series[i]` is the metric over the hour ending i hours before
   * now; hours without rows are 0 (no data reads as nothing happened).
   */
  async hourly(project: ProjectRef, measures: Measure[], now: number, hours: number): Promise<Map<string, number[]>> {
    const series = new Map<string, number[]>(measures.map((measure) => [measure.key, new Array(hours).fill(0)]));
    for (const [stream, group] of Measurer.byStream(measures)) {
      const compiled = await this.compile(project, stream, group, now - hours * 3600_000);
      const time = streams[stream].time;
      const nowParam = compiled.params.bind(Math.floor(now), "Int64");
      const columns = group.map((measure, index) => `${metricSql(measure.metric, stream, compiled.conditions.get(measure.key)!)} AS m${index}`);
      const rows = await this.rows<Record<string, number | null>>(
        `SELECT intDiv(${nowParam} - toUnixTimestamp64Milli(${time}), 3600000) AS hour, ${columns.join(", ")}
         FROM ${compiled.from} AND ${time} < fromUnixTimestamp64Milli(${nowParam}, 'UTC') GROUP BY hour`,
        compiled.params,
      );
      for (const row of rows) {
        const hour = Number(row.hour);
        if (hour < 0 || hour >= hours) continue;
        group.forEach((measure, index) => {
          series.get(measure.key)![hour] = row[`m${index}`] ?? 0;
        });
      }
    }
    return series;
  }

  /**
   * Items (traces, sessions, or spans for tool targets) touched since `touchedSince` that match each measure,
   * and that ended after `notBefore` of the measure (its monitor's creation): at most `limit` each.
   */
  async matches(
    project: ProjectRef,
    measures: (Measure & { notBefore: number })[],
    touchedSince: number,
    limit: number,
  ): Promise<Map<string, { itemKey: string; traceId: string; at: string }[]>> {
    const found = new Map<string, { itemKey: string; traceId: string; at: string }[]>(measures.map((measure) => [measure.key, []]));
    for (const [stream, group] of Measurer.byStream(measures)) {
      const since = Math.min(...group.map((measure) => measure.notBefore));
      const compiled = await this.compile(project, stream, group, since - 24 * 3600_000, stream === "traces" ? ["end_time"] : []);
      const touched = msParam(compiled.params, touchedSince);
      const hits = group.map((measure) => {
        const notBefore = msParam(compiled.params, measure.notBefore);
        return `(${compiled.conditions.get(measure.key)} AND end_time >= ${notBefore})`;
      });
      const tenant = `organization_id = ${compiled.params.bind(project.organizationId, "String")} AND project_id = ${compiled.params.bind(project.id, "String")}`;
      const touchedTraces = `FROM ${this.ch.database}.traces WHERE ${tenant} AND last_ingested_at > ${touched}`;
      const recent = {
        traces: `trace_id IN (SELECT trace_id ${touchedTraces})`,
        sessions: `session_id IN (SELECT assumeNotNull(session_id) ${touchedTraces} AND session_id IS NOT NULL)`,
        spans: `ingested_at > ${touched}`,
      }[stream];
      const item = { traces: "trace_id", sessions: "session_id", spans: "span_id" }[stream];
      const rows = await this.rows<{ item: string; trace_id: string; at: string; hits: number[] }>(
        `SELECT ${item} AS item, trace_id, toString(start_time) AS at, [${hits.join(", ")}] AS hits
         FROM ${compiled.from} AND ${recent} AND (${hits.join(" OR ")})
         ORDER BY start_time LIMIT ${compiled.params.bind(limit * group.length, "UInt32")}`,
        compiled.params,
      );
      for (const row of rows) {
        group.forEach((measure, index) => {
          const list = found.get(measure.key)!;
          if (row.hits[index] && list.length < limit) list.push({ itemKey: row.item, traceId: row.trace_id, at: `${row.at.replace(" ", "T")}Z` });
        });
      }
    }
    return found;
  }
}
