import { logContents, withLogContents } from "./contents";
import type { ClickHouseStore } from "../../db/clickhouse";
import { badRequest, notFound } from "../../lib/errors";
import { decodeTraceCursor, encodeTraceCursor, walkFingerprint, type TraceCursor } from "./cursor";
import { compileTraceFilters, isoToDateTime64, validateTraceFilters, type FilterSqlContext, type ValidFilterSet } from "./filters";
import type { ListTracesBody, SortDirection, SortField, Span, SpanDetail, Trace, TraceAnalyticsResponse, TraceDetail } from "./model";
import { QueryParams } from "./params";
import { bindScope, llmCompletion, straddlingSql, traceItemColumns, traceRelationSql, type TraceColumn, type TraceScope } from "./relation";
import { conversationOf, spanDetailColumns, spanItemColumns, toSpan, toSpanDetail, toTrace, type AnnotationCounts, type SpanDetailRow, type SpanItemRow, type TraceItemRow } from "./rows";
import type { TraceSearch } from "./search";

/** The project a request addresses, resolved from its path. */
export interface ProjectRef {
  id: string;
  organizationId: string;
}

interface SortKeyPart {
  /** Expression the rows are ordered by. */
  order: string;
  /** Exact text of the key for the cursor. */
  select: string;
  type: "Int64" | "UInt64" | "Float64";
  /** SQL comparable with `order` from the bound key. */
  bound(placeholder: string): string;
}

const timeKey = (column: "start_time" | "end_time"): SortKeyPart => ({
  order: column,
  select: `toString(toUnixTimestamp64Nano(${column}))`,
  type: "Int64",
  bound: (placeholder) => `fromUnixTimestamp64Nano(${placeholder}, 'UTC')`,
});
const plainKey = (column: string, type: SortKeyPart["type"]): SortKeyPart => ({
  order: column,
  select: `toString(${column})`,
  type,
  bound: (placeholder) => placeholder,
});

/** `partial`: the roll-up column whose merged value is the sort key, for the bounded page query. */
const sorts: Record<SortField, { columns: TraceColumn[]; key: SortKeyPart[]; partial?: "start_time" | "end_time" }> = {
  startTime: { columns: ["start_time"], key: [timeKey("start_time")], partial: "start_time" },
  endTime: { columns: ["end_time"], key: [timeKey("end_time")], partial: "end_time" },
  durationNs: { columns: ["duration_ns"], key: [plainKey("duration_ns", "Int64")] },
  tokensTotal: { columns: ["tokens_total"], key: [plainKey("tokens_total", "UInt64")] },
  costTotalMicrocents: { columns: ["cost_total_microcents"], key: [plainKey("cost_total_microcents", "UInt64")] },
  // Best match first, then most recent.
  relevance: { columns: ["start_time"], key: [plainKey("relevance", "Float64"), timeKey("start_time")] },
};

const keyFormats: Record<SortKeyPart["type"], RegExp> = {
  Int64: /^-?\d{1,19}$/,
  UInt64: /^\d{1,20}$/,
  Float64: /^-?(\d+(\.\d*)?|\.\d+)(e[-+]?\d+)?$/i,
};

/** Slack for the millisecond rounding of `ingested_at` against the microsecond clock of running queries. */
const clockSlackMs = 1;
const halfDayMs = 12 * 3600 * 1000;
const maxAnalyticsDays = 1000;
/** Days before and after an analytics range whose roll-up rows are read to find its traces' starts and ends. */
const traceAnalyticsSlackDays = 1;
const nsPerSecond = 1e9;
const microcentsPerUsd = 1e8;

interface PageWalk {
  sortBy: SortField;
  direction: SortDirection;
  query: string;
  filters: ValidFilterSet;
  cursor: TraceCursor | null;
  /** The instant every page of the walk reads the traces at. */
  snapshot: string;
  limit: number;
}

interface PageRow {
  trace_id: string;
  key: string[];
  /** The trace's item, when the page query read it (see `queryPage`). */
  item?: TraceItemRow;
}

/**
 * Settings of a read of given traces: through the roll-up's primary key (trace id), never its start-time
 * projection, which ClickHouse may prefer for a query its columns cover and then scans whole.
 */
const byTraceId = { optimize_use_projections: 0 };

/** A statement over the trace relation, built for a fast or an exact read at a snapshot (see `TraceScope.snapshot`). */
type RelationStatement = (exact: boolean) => Promise<{ query: string; params: QueryParams }> | { query: string; params: QueryParams };

export class TracesService {
  constructor(
    private readonly ch: ClickHouseStore,
    private readonly search: TraceSearch,
  ) {}

  private get database() {
    return this.ch.database;
  }

  /** Every read runs with the store's limits, within the organization's share of reads. */
  private rows<T>(organizationId: string, query: string, params: QueryParams, settings?: Record<string, number>): Promise<T[]> {
    return this.ch.read<T>(organizationId, query, params.values, settings);
  }

  /**
   * The latest instant a walk can read the traces at and find the same traces on every later page.
   * `ingested_at` is the time an INSERT started, and its rows become visible when it commits: an
   * insert that started before an instant t and is still running would add rows "ingested up to t"
   * after t was read. So the instant is now, or just before the start of the oldest insert into this
   * database still running; every row ingested up to it is then visible, and stays the same.
   */
  private async settledInstant(organizationId: string): Promise<string> {
    const params = new QueryParams();
    const [{ instant }] = await this.rows<{ instant: string }>(
      organizationId,
      `SELECT toString(toDateTime64(now64(6, 'UTC') - toIntervalMicrosecond(toUInt64(max(elapsed) * 1000000)), 3, 'UTC') - toIntervalMillisecond(${clockSlackMs})) AS instant
       FROM system.processes WHERE query_kind = 'Insert' AND position(query, ${params.bind(this.database, "String")}) > 0`,
      params,
    );
    return instant;
  }

  /**
   * Rows of a statement over the trace relation. At a snapshot it is read from the roll-up alone, and
   * again with straddling traces recomputed from their spans when that read met one: the statement
   * selects `straddles` and keeps straddling traces whatever its conditions (`WHERE straddles OR …`,
   * first in a limited order), so that one is noticed even when its roll-up values would leave it out.
   */
  private async relationRows<T>(organizationId: string, statement: RelationStatement, settings?: Record<string, number>): Promise<T[]> {
    const fast = await statement(false);
    const rows = await this.rows<T & { straddles?: number }>(organizationId, fast.query, fast.params, settings);
    if (!rows.some((row) => row.straddles)) return rows;
    const exact = await statement(true);
    return this.rows<T>(organizationId, exact.query, exact.params, settings);
  }

  /** The compile context of a filter set over a scope; percentiles read the same scope, exactly. */
  private filterContext(scope: TraceScope, params: QueryParams): FilterSqlContext {
    return {
      params,
      database: this.database,
      organizationId: scope.organizationId,
      projectId: scope.projectId,
      spanScope: scope.snapshot ? `ingested_at <= ${scope.snapshot}` : "1",
      percentile: (expression, columns, fraction, window) =>
        `(SELECT quantileExact(${params.bind(fraction, "Float64")})(${expression}) FROM ${traceRelationSql(columns, { database: scope.database, organizationId: scope.organizationId, projectId: scope.projectId, snapshot: scope.snapshot, exact: true })} WHERE ${window})`,
    };
  }

  async list(project: ProjectRef, body: ListTracesBody): Promise<{ items: Trace[]; nextCursor: string | null; hasMore: boolean }> {
    const limit = body.limit ?? 50;
    const query = body.query?.trim() ?? "";
    // Without a query every trace is equally relevant, and relevance ties go to the most recent.
    const sortBy: SortField = body.sortBy === "relevance" && !query ? "startTime" : (body.sortBy ?? "startTime");
    const direction: SortDirection = body.sortDirection ?? "desc";
    const filters = validateTraceFilters(body.filters);
    const fingerprint = walkFingerprint(query, body.filters);
    const cursor = body.cursor ? decodeTraceCursor(body.cursor, { sortBy: body.sortBy ?? "startTime", direction, fingerprint }) : null;

    const snapshot = cursor?.snapshot ?? (await this.settledInstant(project.organizationId));
    const page = await this.selectPage(project, { sortBy, direction, query, filters, cursor, snapshot, limit });
    const hasMore = page.length > limit;
    const rows = page.slice(0, limit);
    const items = rows.every((row) => row.item)
      ? await this.withAnnotationCounts(project, rows.map((row) => row.item!))
      : await this.traceItems(project, rows.map((row) => row.trace_id), snapshot);
    const last = rows.at(-1);
    const nextCursor =
      hasMore && last
        ? encodeTraceCursor({ sortBy: body.sortBy ?? "startTime", direction, key: last.key, traceId: last.trace_id, snapshot, fingerprint })
        : null;
    return { items, nextCursor, hasMore };
  }

  /**
   * Picks the ids of one page: only the sort key and the columns the filters read are aggregated.
   * Every page reads the relation at the walk's snapshot, so keys do not move under the cursor while
   * spans arrive. Time sorts first try the traces near the top of the order only (see
   * `queryPage`), and aggregate the whole project when that does not fill the page.
   */
  private async selectPage(project: ProjectRef, walk: PageWalk): Promise<PageRow[]> {
    if (sorts[walk.sortBy].partial) {
      const fanOut = walk.query || walk.filters.conditions.length ? 50 : 8;
      const rows = await this.queryPage(project, walk, (walk.limit + 1) * fanOut);
      if (rows.length > walk.limit) return rows;
    }
    return this.queryPage(project, walk, null);
  }

  /**
   * One page query. With `candidates`, a time sort aggregates only the traces having a roll-up row
   * among the `candidates` first rows in sort order (past the cursor, ingested by the snapshot), plus
   * the straddling ones, and keeps the traces whose merged time is within that bound. A trace's
   * merged time equals one of its rows' times, so every trace within the bound is among the
   * candidates: when the page fills, it is exactly the page of the whole project.
   *
   * Without a text query the page reads its traces' items too: a second read of the page's traces by id
   * would touch about as many granules again. Unfiltered, the candidates are read first, in a query of
   * their own; filtered, they are many and touch every granule anyway: they are a subquery of the page,
   * which spares a round trip and a long list of ids. (A text query keeps the bound a literal, which
   * bounds its read of spans more tightly.)
   */
  private async queryPage(project: ProjectRef, walk: PageWalk, candidates: number | null): Promise<PageRow[]> {
    const sort = sorts[walk.sortBy];
    const descending = walk.direction === "desc";
    const cursorKey = walk.cursor ? this.cursorBounds(walk.cursor, sort.key) : null;
    const cursorTime = cursorKey?.[0] ?? null;
    const column = candidates !== null ? sort.partial : undefined;
    const filtered = walk.filters.conditions.length > 0;
    const withItems = column !== undefined && !walk.query;
    const candidatesInline = filtered && !walk.query;
    const listed = column && !candidatesInline ? await this.pageCandidates(project, walk, column, candidates!, cursorTime) : null;
    if (listed?.traceIds.length === 0) return [];
    const rows = await this.relationRows<PageRow & TraceItemRow>(project.organizationId, async (exact) => {
      const params = new QueryParams();
      const scope = bindScope(params, this.database, project.organizationId, project.id);
      scope.snapshot = params.bind(walk.snapshot, "DateTime64(3, 'UTC')");
      scope.exact = exact;
      const conditions: string[] = [];
      let withClause = "";

      if (walk.cursor && cursorKey) {
        const bounds = sort.key.map((part, i) => part.bound(params.bind(cursorKey[i], part.type)));
        conditions.push(`(${[...sort.key.map((part) => part.order), "trace_id"].join(", ")}) ${descending ? "<" : ">"} (${[...bounds, params.bind(walk.cursor.traceId, "String")].join(", ")})`);
      }

      if (column) {
        let pageBound: string;
        if (listed) {
          pageBound = params.bind(listed.bound, "DateTime64(9, 'UTC')");
          scope.traceIds = params.bind(listed.traceIds, "Array(String)");
        } else {
          const bound = this.pageBoundSql(params, scope, walk, column, candidates!, cursorTime);
          withClause = `WITH ${bound.bound} AS page_bound `;
          pageBound = "page_bound";
          scope.traceIds = `(${bound.traceIds("page_bound")})`;
        }
        conditions.push(`${column} ${descending ? ">=" : "<="} ${pageBound}`);
        // Newest first, the page's traces start at the bound or later, and so do all their spans.
        if (column === "start_time" && descending) scope.spansStartFrom = pageBound;
      }

      const compiled = compileTraceFilters(walk.filters, this.filterContext(scope, params));
      conditions.unshift(compiled.where);
      const relation = traceRelationSql(new Set([...sort.columns, ...compiled.columns, ...(withItems ? traceItemColumns : [])]), scope);
      const search = walk.query ? await this.search.relevanceSql(walk.query, scope, params) : null;
      const from = search ? `${relation} AS trace INNER JOIN ${search} AS match USING (trace_id)` : relation;
      const direction = descending ? "DESC" : "ASC";
      const query = `${withClause}SELECT ${withItems ? "*, " : "trace_id, "}[${sort.key.map((part) => part.select).join(", ")}] AS key${withItems ? "" : ", straddles"}
         FROM ${from}
         WHERE straddles OR (${conditions.join(" AND ")})
         ORDER BY ${["straddles DESC", ...sort.key.map((part) => `${part.order} ${direction}`), `trace_id ${direction}`].join(", ")}
         LIMIT ${params.bind(walk.limit + 1, "UInt32")}`;
      return { query, params };
    }, listed ? byTraceId : undefined);
    return withItems ? rows.map(({ key, ...item }) => ({ trace_id: item.trace_id, key, item })) : rows;
  }

  /** The cursor's sort key, checked against the sort's key format. */
  private cursorBounds(cursor: TraceCursor, key: SortKeyPart[]): string[] {
    if (cursor.key.length !== key.length || !key.every((part, i) => keyFormats[part.type].test(cursor.key[i]))) {
      throw badRequest("cursor: is not a cursor returned by this list");
    }
    return cursor.key;
  }

  /**
   * The bound of a time-sorted page (the `candidates`-th roll-up row's time in sort order, past the
   * cursor, ingested by the snapshot), and the query of the traces with a row within a bound, plus the
   * straddling ones.
   */
  private pageBoundSql(params: QueryParams, scope: TraceScope, walk: PageWalk, column: "start_time" | "end_time", candidates: number, cursorTime: string | null) {
    const descending = walk.direction === "desc";
    const pastCursor = cursorTime ? ` AND ${column} ${descending ? "<=" : ">="} ${timeKey(column).bound(params.bind(cursorTime, "Int64"))}` : "";
    const rowsPastCursor = `FROM ${this.database}.traces WHERE organization_id = ${scope.organizationId} AND project_id = ${scope.projectId}
      AND first_ingested_at <= ${scope.snapshot}${pastCursor}`;
    return {
      bound: `(SELECT ${descending ? "min" : "max"}(${column}) FROM (SELECT ${column} ${rowsPastCursor}
        ORDER BY ${column} ${descending ? "DESC" : "ASC"} LIMIT ${params.bind(candidates, "UInt32")}))`,
      traceIds: (bound: string) => `SELECT trace_id ${rowsPastCursor} AND ${column} ${descending ? ">=" : "<="} ${bound} UNION ALL ${straddlingSql(scope)}`,
    };
  }

  /**
   * The page bound and its candidate traces (see `pageBoundSql`), read apart from the page's
   * aggregation: these rows come from the roll-up's start-time projection, and the aggregation of their
   * traces then reads the roll-up by trace id through its primary key.
   */
  private async pageCandidates(
    project: ProjectRef,
    walk: PageWalk,
    column: "start_time" | "end_time",
    candidates: number,
    cursorTime: string | null,
  ): Promise<{ bound: string; traceIds: string[] }> {
    const params = new QueryParams();
    const scope = bindScope(params, this.database, project.organizationId, project.id);
    scope.snapshot = params.bind(walk.snapshot, "DateTime64(3, 'UTC')");
    const bound = this.pageBoundSql(params, scope, walk, column, candidates, cursorTime);
    const [row] = await this.rows<{ bound: string; trace_ids: string[] }>(
      project.organizationId,
      `WITH ${bound.bound} AS page_bound SELECT toString(page_bound) AS bound, groupUniqArray(trace_id) AS trace_ids FROM (${bound.traceIds("page_bound")})`,
      params,
    );
    return { bound: row?.bound ?? "", traceIds: row?.trace_ids ?? [] };
  }

  /**
   * The ids of every trace matching the filters, in id order, all read at one snapshot. The project's
   * traces are walked in windows of at most `windowSize` consecutive ids, each aggregated on its own:
   * every trace is aggregated once, and memory holds one window's ids.
   */
  async *matchingTraceIds(project: ProjectRef, filters: ValidFilterSet, windowSize: number): AsyncGenerator<{ ids: string[]; snapshot: string }> {
    const snapshot = await this.settledInstant(project.organizationId);
    let after = "";
    for (;;) {
      const windowParams = new QueryParams();
      // The roll-up is sorted by trace id, so this reads about `windowSize` rows. A trace may have
      // several rows: a window holds at most `windowSize` traces.
      const [windowEnd] = await this.rows<{ trace_id: string }>(
        project.organizationId,
        `SELECT trace_id FROM ${this.database}.traces
         WHERE organization_id = ${windowParams.bind(project.organizationId, "String")} AND project_id = ${windowParams.bind(project.id, "String")}
           AND trace_id > ${windowParams.bind(after, "String")}
         ORDER BY trace_id LIMIT 1 OFFSET ${windowParams.bind(windowSize - 1, "UInt32")}`,
        windowParams,
      );
      const rows = await this.relationRows<{ trace_id: string }>(project.organizationId, (exact) => {
        const params = new QueryParams();
        const scope = bindScope(params, this.database, project.organizationId, project.id);
        scope.snapshot = params.bind(snapshot, "DateTime64(3, 'UTC')");
        scope.exact = exact;
        scope.traceIdAfter = params.bind(after, "String");
        if (windowEnd) scope.traceIdThrough = params.bind(windowEnd.trace_id, "String");
        const compiled = compileTraceFilters(filters, this.filterContext(scope, params));
        const query = `SELECT trace_id, straddles FROM ${traceRelationSql(compiled.columns, scope)} WHERE straddles OR (${compiled.where}) ORDER BY trace_id`;
        return { query, params };
      });
      if (rows.length) yield { ids: rows.map((row) => row.trace_id), snapshot };
      if (!windowEnd) return;
      after = windowEnd.trace_id;
    }
  }

  /** Trace items for these ids, in the given order, aggregated over their roll-up rows (at `snapshot` when given). */
  async traceItems(project: ProjectRef, traceIds: string[], snapshot?: string): Promise<Trace[]> {
    if (!traceIds.length) return [];
    const statement = (exact: boolean) => {
      const params = new QueryParams();
      const scope = bindScope(params, this.database, project.organizationId, project.id);
      scope.traceIds = params.bind(traceIds, "Array(String)");
      if (snapshot) scope.snapshot = params.bind(snapshot, "DateTime64(3, 'UTC')");
      scope.exact = exact;
      return { query: `SELECT * FROM ${traceRelationSql(traceItemColumns, scope)}`, params };
    };
    const [rows, annotations] = await Promise.all([
      this.relationRows<TraceItemRow>(project.organizationId, statement, byTraceId),
      this.annotationCounts(project, traceIds),
    ]);
    const byId = new Map(rows.map((row) => [row.trace_id, row]));
    return tracesOf(project, traceIds.flatMap((id) => byId.get(id) ?? []), annotations);
  }

  /** Trace items of rows already read, in their order, with their published annotation counts. */
  private async withAnnotationCounts(project: ProjectRef, rows: TraceItemRow[]): Promise<Trace[]> {
    if (!rows.length) return [];
    return tracesOf(project, rows, await this.annotationCounts(project, rows.map((row) => row.trace_id)));
  }

  /** Published annotations per trace and verdict, from the ClickHouse copy of scores. */
  private async annotationCounts(project: ProjectRef, traceIds: string[]): Promise<Map<string, AnnotationCounts>> {
    const params = new QueryParams();
    const rows = await this.rows<{ trace_id: string; positive: number; negative: number }>(
      project.organizationId,
      `SELECT trace_id, countIf(passed) AS positive, countIf(NOT passed) AS negative
       FROM ${this.database}.scores FINAL
       WHERE organization_id = ${params.bind(project.organizationId, "String")} AND project_id = ${params.bind(project.id, "String")}
         AND trace_id IN ${params.bind(traceIds, "Array(String)")} AND source = 'annotation' AND drafted_at IS NULL
       GROUP BY trace_id`,
      params,
    );
    return new Map(rows.map((row) => [row.trace_id, { positive: row.positive, negative: row.negative }]));
  }

  /**
   * The trace's relation row with these columns; its start and end bound its spans' start times, so
   * reads of `spans` use the sort key. 404 when absent.
   */
  private async traceRow(project: ProjectRef, traceId: string, columns: TraceColumn[]): Promise<TraceItemRow & { last_llm_span_id: string }> {
    const params = new QueryParams();
    const scope = bindScope(params, this.database, project.organizationId, project.id);
    scope.traceIds = params.bind([traceId], "Array(String)");
    const [row] = await this.rows<TraceItemRow & { last_llm_span_id: string }>(project.organizationId, `SELECT * FROM ${traceRelationSql(columns, scope)}`, params, byTraceId);
    if (!row) throw notFound("Trace");
    return row;
  }

  /** Conditions selecting one trace's spans through the sort key: tenant, time range, then id. */
  private traceSpansWhere(project: ProjectRef, trace: { trace_id: string; start_time: string; end_time: string }, params: QueryParams): string {
    const time = (iso: string) => params.bind(iso.replace("T", " ").replace("Z", ""), "DateTime64(9, 'UTC')");
    return `organization_id = ${params.bind(project.organizationId, "String")} AND project_id = ${params.bind(project.id, "String")}
      AND start_time BETWEEN ${time(trace.start_time)} AND ${time(trace.end_time)} AND trace_id = ${params.bind(trace.trace_id, "String")}`;
  }

  async get(project: ProjectRef, traceId: string): Promise<TraceDetail> {
    const row = await this.traceRow(project, traceId, [...traceItemColumns, "last_llm_span_id"]);
    const params = new QueryParams();
    const lastLlmSpanId = params.bind(row.last_llm_span_id, "String");
    // One read of the trace's spans: those carrying metadata, and the last LLM span's messages.
    const [spanRows, lastLlmLogContents, annotations] = await Promise.all([
      this.rows<{ metadata: Record<string, string>; is_last_llm: number; system_instructions: string; input_messages: string; output_messages: string }>(
        project.organizationId,
        `SELECT metadata, span_id = ${lastLlmSpanId} AS is_last_llm, if(is_last_llm, system_instructions, '') AS system_instructions,
           if(is_last_llm, input_messages, '') AS input_messages, if(is_last_llm, output_messages, '') AS output_messages
         FROM ${this.database}.spans FINAL
         WHERE ${this.traceSpansWhere(project, row, params)} AND (notEmpty(metadata) OR is_last_llm)
         ORDER BY start_time, span_id`,
        params,
      ),
      row.last_llm_span_id ? logContents(this.ch, project.organizationId, project.id, traceId, row.last_llm_span_id) : Promise.resolve(null),
      this.annotationCounts(project, [traceId]),
    ]);
    // Spans in start order; the first span to carry a key gives its value, like the roll-up's ids.
    const metadata: Record<string, string> = {};
    for (const { metadata: spanMetadata } of spanRows) {
      for (const [key, value] of Object.entries(spanMetadata)) if (!(key in metadata)) metadata[key] = value;
    }
    const lastLlm = spanRows.find((span) => span.is_last_llm);
    return {
      ...toTrace(project.organizationId, project.id, row, annotations.get(traceId)),
      metadata,
      conversation: conversationOf(lastLlm ? withLogContents(lastLlm, lastLlmLogContents) : null),
    };
  }

  async spans(project: ProjectRef, traceId: string): Promise<{ items: Span[] }> {
    const trace = await this.traceRow(project, traceId, ["start_time", "end_time"]);
    const params = new QueryParams();
    const rows = await this.rows<SpanItemRow>(
      project.organizationId,
      `SELECT ${spanItemColumns.join(", ")} FROM ${this.database}.spans FINAL WHERE ${this.traceSpansWhere(project, trace, params)} ORDER BY start_time, span_id`,
      params,
    );
    return { items: rows.map(toSpan) };
  }

  async span(project: ProjectRef, traceId: string, spanId: string): Promise<SpanDetail> {
    const trace = await this.traceRow(project, traceId, ["start_time", "end_time"]);
    const params = new QueryParams();
    const [[row], contents] = await Promise.all([
      this.rows<SpanDetailRow>(
        project.organizationId,
        `SELECT ${spanDetailColumns.join(", ")} FROM ${this.database}.spans FINAL
         WHERE ${this.traceSpansWhere(project, trace, params)} AND span_id = ${params.bind(spanId, "String")} LIMIT 1`,
        params,
      ),
      logContents(this.ch, project.organizationId, project.id, traceId, spanId),
    ]);
    if (!row) throw notFound("Span");
    return toSpanDetail(withLogContents(row, contents));
  }

  async analytics(project: ProjectRef, fromIso?: string, toIso?: string): Promise<TraceAnalyticsResponse> {
    const to = toIso === undefined ? Date.now() : parseInstant("toIso", toIso);
    const from = fromIso === undefined ? to - 7 * 24 * 3600 * 1000 : parseInstant("fromIso", fromIso);
    if (from > to) throw badRequest("fromIso: must not be after toIso");
    if (to - from > maxAnalyticsDays * 24 * 3600 * 1000) throw badRequest(`fromIso: the range may span at most ${maxAnalyticsDays} days`);

    const params = new QueryParams();
    const scope = bindScope(params, this.database, project.organizationId, project.id);
    const fromParam = params.bind(isoToDateTime64(fromIso ?? new Date(from).toISOString()), "DateTime64(9, 'UTC')");
    const toParam = params.bind(isoToDateTime64(toIso ?? new Date(to).toISOString()), "DateTime64(9, 'UTC')");
    const tenant = `organization_id = ${scope.organizationId} AND project_id = ${scope.projectId}`;
    const twelveHours = (time: string) => `toStartOfInterval(${time}, INTERVAL 12 HOUR)`;
    // A trace's start is the earliest start among its roll-up rows. Only rows starting near the range
    // are read (through the roll-up's start-time projection): a trace counts where its earliest span
    // within a day of the range starts, and its duration is that of those spans.
    scope.rowsStartBetween = [`${fromParam} - INTERVAL ${traceAnalyticsSlackDays} DAY`, `${toParam} + INTERVAL ${traceAnalyticsSlackDays} DAY`];
    // Whole hours of the range come from the hourly roll-up, the partial hours at its edges from spans.
    const firstWholeHour = `if(toStartOfHour(${fromParam}) = ${fromParam}, toStartOfHour(${fromParam}), toStartOfHour(${fromParam}) + INTERVAL 1 HOUR)`;
    const wholeHoursEnd = `toStartOfHour(${toParam})`;

    type TraceBucket = { bucket: string; total: number; traces: number; duration_median_ns: number; ttft_median_ns: number };
    type SpanBucket = { bucket: string; total: number; spans: number; tokens: number; cost: number };
    const [traceBuckets, spanBuckets] = await Promise.all([
      this.rows<TraceBucket>(
        project.organizationId,
        `SELECT toString(${twelveHours("start_time")}) AS bucket, grouping(${twelveHours("start_time")}) AS total, count() AS traces, quantileExact(0.5)(duration_ns) AS duration_median_ns,
           quantileExactIf(0.5)(time_to_first_token_ns, time_to_first_token_ns > 0) AS ttft_median_ns
         FROM ${traceRelationSql(["start_time", "duration_ns", "time_to_first_token_ns"], scope)}
         WHERE start_time BETWEEN ${fromParam} AND ${toParam}
         GROUP BY ${twelveHours("start_time")} WITH ROLLUP`,
        params,
      ),
      this.rows<SpanBucket>(
        project.organizationId,
        `SELECT toString(period) AS bucket, grouping(period) AS total, sum(hour_spans) AS spans, sum(hour_tokens) AS tokens, sum(hour_cost) AS cost
         FROM (
           SELECT ${twelveHours("hour")} AS period, spans AS hour_spans, tokens AS hour_tokens, cost_total_microcents AS hour_cost
           FROM ${this.database}.analytics_hourly
           WHERE ${tenant} AND hour >= ${firstWholeHour} AND hour < ${wholeHoursEnd}
           UNION ALL
           SELECT ${twelveHours("toDateTime(start_time, 'UTC')")} AS period, count(),
             sumIf(tokens_input + tokens_output + tokens_cache_read + tokens_cache_create + tokens_reasoning, ${llmCompletion}),
             sumIf(cost_total_microcents, NOT is_usage_wrapper)
           FROM ${this.database}.spans
           WHERE ${tenant} AND start_time BETWEEN ${fromParam} AND ${toParam} AND (start_time < ${firstWholeHour} OR start_time >= ${wholeHoursEnd})
           GROUP BY period
         )
         GROUP BY period WITH ROLLUP`,
        params,
      ),
    ]);

    const starts: string[] = [];
    for (let start = Math.floor(from / halfDayMs) * halfDayMs; start <= to; start += halfDayMs) starts.push(new Date(start).toISOString());
    const byBucket = <Row extends { bucket: string; total: number }>(rows: Row[]) => {
      const map = new Map<string, Row>();
      for (const row of rows) if (!row.total) map.set(new Date(`${row.bucket.replace(" ", "T")}Z`).toISOString(), row);
      return { map, total: rows.find((row) => row.total) };
    };
    const traces = byBucket(traceBuckets);
    const spans = byBucket(spanBuckets);
    const series = <Row extends { bucket: string; total: number }>(rows: { map: Map<string, Row> }, value: (row: Row) => number) =>
      starts.map((start) => {
        const row = rows.map.get(start);
        return { bucket: start, value: row ? value(row) : 0 };
      });
    return {
      traces: { total: traces.total?.traces ?? 0, buckets: series(traces, (row) => row.traces) },
      cost: { total: (spans.total?.cost ?? 0) / microcentsPerUsd, buckets: series(spans, (row) => row.cost / microcentsPerUsd) },
      duration: { median: (traces.total?.duration_median_ns ?? 0) / nsPerSecond, buckets: series(traces, (row) => row.duration_median_ns / nsPerSecond) },
      tokens: { total: spans.total?.tokens ?? 0, buckets: series(spans, (row) => row.tokens) },
      timeToFirstToken: { median: (traces.total?.ttft_median_ns ?? 0) / nsPerSecond, buckets: series(traces, (row) => row.ttft_median_ns / nsPerSecond) },
      spans: { total: spans.total?.spans ?? 0, buckets: series(spans, (row) => row.spans) },
    };
  }
}

function tracesOf(project: ProjectRef, rows: TraceItemRow[], annotations: Map<string, AnnotationCounts>): Trace[] {
  return rows.map((row) => toTrace(project.organizationId, project.id, row, annotations.get(row.trace_id)));
}

function parseInstant(field: string, value: string): number {
  const text = isoToDateTime64(value);
  if (!text) throw badRequest(`${field}: must be an ISO-8601 timestamp`);
  return Date.parse(`${text.slice(0, 23).replace(" ", "T")}Z`);
}
