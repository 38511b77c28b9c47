import type { ClickHouseStore } from "../../db/clickhouse";
import { notFound } from "../../lib/errors";
import type { SessionMemoryChanges, SessionMemorySummary } from "./model";
import { QueryParams } from "./params";
import { jsonObjects } from "./rows";
import type { ProjectRef } from "./service";

/**
 * Memory footprint of a session or trace, read from spans of the OpenTelemetry GenAI memory
 * conventions (`gen_ai.operation.name`):
 * - `search_memory`: a read; each record returned counts its tokens as read tokens.
 * - `update_memory`: an upsert of records; `delete_memory`: removal of records;
 *   `delete_memory_store`: removal of every record of the store known so far; `create_memory_store`
 *   changes no record.
 * - store and record: columns `memory_store_id` / `memory_record_id` (`gen_ai.memory.store.id`,
 *   `gen_ai.memory.record.id`); "" is the unattributed bucket.
 * - record bodies: the `gen_ai.memory.records` attribute (a JSON array of {id?, content}; a record
 *   without id belongs to the span's record id), else the span's content: the input messages (or
 *   tool input) of an update, the output messages (or tool output) of a search.
 * Changes compare each record's body before the scope's first write (the latest earlier write in the
 * project) with its body after the scope's last write.
 */

const memoryOperations = ["search_memory", "update_memory", "delete_memory", "create_memory_store", "delete_memory_store"];
const writeOperations = ["update_memory", "delete_memory", "delete_memory_store"];
/** Rows of the project's other writes read at a time. */
const historyPage = 5000;

/** Token estimate: about four characters a token, as common BPE vocabularies average over English text. */
export const estimateTokens = (text: string | null) => (text ? Math.ceil(text.length / 4) : 0);

interface MemorySpanRow {
  span_id: string;
  trace_id: string;
  /** `start_time` as text, which orders like the time. */
  started_at: string;
  operation: string;
  memory_store_id: string;
  memory_record_id: string;
  records_json: string;
  input_messages: string;
  output_messages: string;
  tool_input: string;
  tool_output: string;
}

interface RecordEvent {
  recordId: string;
  /** null when the span did not capture the body. */
  body: string | null;
}

function messagesText(json: string): string | null {
  const texts = jsonObjects(json).flatMap((message) =>
    Array.isArray(message.parts)
      ? message.parts.flatMap((part: { type?: unknown; content?: unknown }) => (part?.type === "text" && typeof part.content === "string" ? [part.content] : []))
      : [],
  );
  return texts.length ? texts.join("\n") : null;
}

const bodyText = (content: unknown) => (content === undefined || content === null ? null : typeof content === "string" ? content : JSON.stringify(content));

/** The records a memory span touches, with the bodies it carries. */
function recordsOf(span: MemorySpanRow): RecordEvent[] {
  const listed = jsonObjects(span.records_json);
  if (listed.length) {
    return listed.map((record) => ({ recordId: typeof record.id === "string" ? record.id : span.memory_record_id, body: bodyText(record.content) }));
  }
  const fallback =
    span.operation === "search_memory"
      ? (messagesText(span.output_messages) ?? (span.tool_output || null))
      : span.operation === "update_memory"
        ? (messagesText(span.input_messages) ?? (span.tool_input || null))
        : null;
  return [{ recordId: span.memory_record_id, body: fallback }];
}

const recordKey = (storeId: string, recordId: string) => `${storeId}\u0000${recordId}`;

/** Order of spans by (start_time, span_id), as ClickHouse sorts them: `started_at` text sorts like the time. */
const precedes = (a: MemorySpanRow, b: MemorySpanRow) => a.started_at < b.started_at || (a.started_at === b.started_at && a.span_id < b.span_id);

/** Tokens an edit added and removed: the differing middle of the two bodies, after their common ends. */
function endpointDiff(before: string, after: string): { added: number; removed: number } {
  let prefix = 0;
  const shorter = Math.min(before.length, after.length);
  while (prefix < shorter && before[prefix] === after[prefix]) prefix++;
  let suffix = 0;
  while (suffix < shorter - prefix && before[before.length - 1 - suffix] === after[after.length - 1 - suffix]) suffix++;
  return {
    added: estimateTokens(after.slice(prefix, after.length - suffix)),
    removed: estimateTokens(before.slice(prefix, before.length - suffix)),
  };
}

interface RecordBody {
  exists: boolean;
  /** null when not captured (or when the record does not exist). */
  body: string | null;
}

interface RecordState {
  storeId: string;
  recordId: string;
  readTokens: number;
  /** The record just before the scope first wrote it; null while the scope has not written it. */
  before: RecordBody | null;
  /** The record after the scope's last write to it. */
  after: RecordBody;
  lastChangeSpanId: string | null;
}

export type MemoryScope = { kind: "session"; sessionId: string; traceId?: string } | { kind: "trace"; traceId: string };

const spanColumns = `span_id, trace_id, toString(start_time) AS started_at, operation, memory_store_id, memory_record_id,
  attr_string['gen_ai.memory.records'] AS records_json, input_messages, output_messages, tool_input, tool_output`;

const absent: RecordBody = { exists: false, body: null };

export class MemoryService {
  constructor(private readonly ch: ClickHouseStore) {}

  private rows<T>(organizationId: string, query: string, params: QueryParams): Promise<T[]> {
    return this.ch.read<T>(organizationId, query, params.values);
  }

  /** The trace ids of the scope; 404 when the session or trace is unknown or the trace is not the session's. */
  private async scopeTraceIds(project: ProjectRef, scope: MemoryScope): Promise<string[]> {
    const params = new QueryParams();
    const tenant = `organization_id = ${params.bind(project.organizationId, "String")} AND project_id = ${params.bind(project.id, "String")}`;
    if (scope.kind === "trace") {
      const [row] = await this.rows<{ trace_id: string }>(
        project.organizationId,
        `SELECT trace_id FROM ${this.ch.database}.traces WHERE ${tenant} AND trace_id = ${params.bind(scope.traceId, "String")} LIMIT 1`,
        params,
      );
      if (!row) throw notFound("Trace");
      return [scope.traceId];
    }
    const rows = await this.rows<{ trace_id: string }>(
      project.organizationId,
      `SELECT DISTINCT trace_id FROM ${this.ch.database}.spans WHERE ${tenant} AND session_id = ${params.bind(scope.sessionId, "String")}`,
      params,
    );
    if (!rows.length) throw notFound("Session");
    const ids = rows.map((row) => row.trace_id);
    if (scope.traceId === undefined) return ids;
    if (!ids.includes(scope.traceId)) throw notFound("Trace");
    return [scope.traceId];
  }

  /**
   * The project's writes to these stores outside the scope's traces, up to `until`, in time order,
   * read a page at a time.
   */
  private async *outsideWrites(project: ProjectRef, traceIds: string[], storeIds: string[], until: string): AsyncGenerator<MemorySpanRow> {
    let last: MemorySpanRow | null = null;
    for (;;) {
      const params = new QueryParams();
      let pastLast = "";
      if (last) {
        const lastStart = params.bind(last.started_at, "DateTime64(9, 'UTC')");
        pastLast = ` AND start_time >= ${lastStart} AND (start_time, span_id) > (${lastStart}, ${params.bind(last.span_id, "String")})`;
      }
      const page = await this.rows<MemorySpanRow>(
        project.organizationId,
        `SELECT ${spanColumns} FROM ${this.ch.database}.spans FINAL
         WHERE organization_id = ${params.bind(project.organizationId, "String")} AND project_id = ${params.bind(project.id, "String")}
           AND trace_id NOT IN ${params.bind(traceIds, "Array(String)")} AND operation IN ${params.bind(writeOperations, "Array(String)")}
           AND memory_store_id IN ${params.bind(storeIds, "Array(String)")} AND start_time <= ${params.bind(until, "DateTime64(9, 'UTC')")}${pastLast}
         ORDER BY start_time, span_id
         LIMIT ${historyPage}`,
        params,
      );
      yield* page;
      if (page.length < historyPage) return;
      last = page.at(-1)!;
    }
  }

  /**
   * Replays, in time order, the scope's memory spans together with the project's other writes to the
   * same stores up to the scope's last write: the world's state of each record gives what the scope
   * found before its first write, and the scope's own writes give what it left. The whole history is
   * replayed, but the world keeps only the records the answer can name: those the scope writes, and
   * every record of a store it drops.
   */
  private async analyze(project: ProjectRef, scope: MemoryScope): Promise<RecordState[]> {
    const traceIds = await this.scopeTraceIds(project, scope);
    const params = new QueryParams();
    const spans = await this.rows<MemorySpanRow>(
      project.organizationId,
      `SELECT ${spanColumns} FROM ${this.ch.database}.spans FINAL
       WHERE organization_id = ${params.bind(project.organizationId, "String")} AND project_id = ${params.bind(project.id, "String")}
         AND trace_id IN ${params.bind(traceIds, "Array(String)")} AND operation IN ${params.bind(memoryOperations, "Array(String)")}
       ORDER BY start_time, span_id`,
      params,
    );
    const scopeWrites = spans.filter((span) => writeOperations.includes(span.operation));
    const writtenRecords = new Set(scopeWrites.flatMap((span) => recordsOf(span).map(({ recordId }) => recordKey(span.memory_store_id, recordId))));
    const droppedStores = new Set(scopeWrites.filter((span) => span.operation === "delete_memory_store").map((span) => span.memory_store_id));
    const kept = (storeId: string, recordId: string) => droppedStores.has(storeId) || writtenRecords.has(recordKey(storeId, recordId));

    const world = new Map<string, RecordBody & { storeId: string; recordId: string }>();
    const states = new Map<string, RecordState>();
    const state = (storeId: string, recordId: string) => {
      const key = recordKey(storeId, recordId);
      let found = states.get(key);
      if (!found) {
        found = { storeId, recordId, readTokens: 0, before: null, after: absent, lastChangeSpanId: null };
        states.set(key, found);
      }
      return found;
    };
    /** Applies a write to the world and, for the scope's own spans, to what the scope changed. */
    const write = (span: MemorySpanRow, recordId: string, next: RecordBody, inScope: boolean) => {
      const key = recordKey(span.memory_store_id, recordId);
      if (inScope) {
        const record = state(span.memory_store_id, recordId);
        record.before ??= world.get(key) ?? absent;
        record.after = next;
        record.lastChangeSpanId = span.span_id;
      }
      if (kept(span.memory_store_id, recordId)) world.set(key, { storeId: span.memory_store_id, recordId, ...next });
    };

    const replay = (span: MemorySpanRow, inScope: boolean) => {
      if (span.operation === "search_memory") {
        for (const { recordId, body } of recordsOf(span)) state(span.memory_store_id, recordId).readTokens += estimateTokens(body);
      } else if (span.operation === "update_memory") {
        for (const { recordId, body } of recordsOf(span)) write(span, recordId, { exists: true, body }, inScope);
      } else if (span.operation === "delete_memory") {
        for (const { recordId } of recordsOf(span)) write(span, recordId, absent, inScope);
      } else if (span.operation === "delete_memory_store") {
        for (const record of [...world.values()]) {
          if (record.storeId === span.memory_store_id && record.exists) write(span, record.recordId, absent, inScope);
        }
      }
    };

    // Both sequences are in (start_time, span_id) order; they are merged as the history streams in.
    let next = 0;
    if (scopeWrites.length) {
      const storeIds = [...new Set(scopeWrites.map((span) => span.memory_store_id))];
      for await (const outside of this.outsideWrites(project, traceIds, storeIds, scopeWrites.at(-1)!.started_at)) {
        while (next < spans.length && precedes(spans[next], outside)) replay(spans[next++], true);
        replay(outside, false);
      }
    }
    while (next < spans.length) replay(spans[next++], true);
    return [...states.values()].sort((a, b) => a.storeId.localeCompare(b.storeId) || a.recordId.localeCompare(b.recordId));
  }

  async summary(project: ProjectRef, scope: MemoryScope): Promise<SessionMemorySummary> {
    const states = await this.analyze(project, scope);
    const records = states.map((record) => {
      const change = changeOf(record);
      return {
        storeId: record.storeId,
        recordId: record.recordId,
        readTokens: record.readTokens,
        tokensAdded: change?.tokensAdded ?? 0,
        tokensRemoved: change?.tokensRemoved ?? 0,
      };
    });
    const sum = (pick: (record: (typeof records)[number]) => number) => records.reduce((total, record) => total + pick(record), 0);
    return {
      records,
      total: {
        readTokens: sum((record) => record.readTokens),
        tokensAdded: sum((record) => record.tokensAdded),
        tokensRemoved: sum((record) => record.tokensRemoved),
        writeRecords: states.filter((record) => record.before).length,
      },
    };
  }

  async changes(project: ProjectRef, scope: MemoryScope): Promise<SessionMemoryChanges> {
    const states = await this.analyze(project, scope);
    const records = states.flatMap((record) => {
      const change = changeOf(record);
      return change && (change.tokensAdded || change.tokensRemoved || change.kind !== "updated" || change.beforeBody !== change.afterBody) ? [change] : [];
    });
    return { records };
  }
}

type Change = SessionMemoryChanges["records"][number];

/** The net change the scope made to one record; null when it made none (not written, or created and removed). */
function changeOf(record: RecordState): Change | null {
  const { before, after } = record;
  if (!before || (!before.exists && !after.exists)) return null;
  const kind: Change["kind"] = !after.exists ? "removed" : before.exists ? "updated" : "added";
  const beforeBody = kind === "added" ? null : before.body;
  const afterBody = kind === "removed" ? null : after.body;
  const degraded = (kind !== "added" && beforeBody === null) || (kind !== "removed" && afterBody === null);
  let tokens = { added: 0, removed: 0 };
  if (kind === "added") tokens = { added: estimateTokens(afterBody), removed: 0 };
  else if (kind === "removed") tokens = { added: 0, removed: estimateTokens(beforeBody) };
  else if (beforeBody !== null && afterBody !== null) tokens = endpointDiff(beforeBody, afterBody);
  return {
    storeId: record.storeId,
    recordId: record.recordId,
    kind,
    beforeBody,
    afterBody,
    tokensAdded: tokens.added,
    tokensRemoved: tokens.removed,
    degraded,
    lastChangeSpanId: record.lastChangeSpanId,
  };
}
