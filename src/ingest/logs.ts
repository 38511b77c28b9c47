/**
 * The logs stage of the pipeline: decode → map → redact → store. Each GenAI event record becomes one
 * `span_contents` row keyed by the span it names (sql/clickhouse/010_span_contents.sql), merged into that span's
 * messages when it is read, so the record may arrive before or after its span. Chosen over rewriting the span row:
 * a span acknowledged a moment ago may still wait in the write-ahead log of another process, and a rewritten row
 * would be counted twice by the `traces` roll-up. Other log records are not stored: they are counted in the
 * partial-success answer.
 */
import { createHash } from "node:crypto";
import type { ClickHouseStore } from "../db/clickhouse";
import { badRequest } from "../lib/errors";
import { attributeText, attributesToObject } from "./attributes";
import { BackpressureError } from "./batch";
import { DecodeError } from "./decode-model";
import { decodeLogs, type DecodedLogRecord, type DecodedLogs } from "./decode-logs";
import { mapLogRecord } from "./map-logs";
import { messagesText } from "./messages";
import { PROJECT_ATTRIBUTE, saturated, summarize, type ExportOwner, type ExportProjects, type ExportRequest, type LogSink } from "./pipeline";
import type { OtlpBody } from "./receive";
import type { ExportOutcome } from "./respond";

export interface SpanContentRow {
  organization_id: string;
  project_id: string;
  trace_id: string;
  span_id: string;
  record_time: string;
  record_index: number;
  record_hash: string;
  event_name: string;
  system_instructions: string;
  input_messages: string;
  output_messages: string;
  message_text: string;
  finish_reasons: string[];
  retention_days: number;
}

const TRACE_ID = /^[0-9a-f]{32}$/;
const SPAN_ID = /^[0-9a-f]{16}$/;
const ALL_ZERO = /^0*$/;

const jsonOrEmpty = (list: unknown[]) => (list.length === 0 ? "" : JSON.stringify(list));

/** Decimal epoch nanoseconds as ClickHouse DateTime64(9) text. */
function clickHouseNanos(nanos: string): string {
  const padded = nanos.padStart(10, "0");
  const seconds = Number(padded.slice(0, -9));
  return `${new Date(seconds * 1000).toISOString().slice(0, 19).replace("T", " ")}.${padded.slice(-9)}`;
}

/** Equal for the same record sent again, so a retried export folds into the rows it already wrote. */
const recordHash = (record: DecodedLogRecord) =>
  createHash("sha256")
    .update(JSON.stringify([record.traceId, record.spanId, record.timeUnixNano, record.eventName, record.body, attributesToObject(record.attributes)]))
    .digest("hex")
    .slice(0, 32);

/** Why a record cannot be stored as a span's messages, or null. */
function unlinked(record: DecodedLogRecord): string | null {
  if (!TRACE_ID.test(record.traceId) || ALL_ZERO.test(record.traceId) || !SPAN_ID.test(record.spanId) || ALL_ZERO.test(record.spanId)) {
    return "names no span (trace and span id)";
  }
  return null;
}

export class LogIngest implements LogSink {
  constructor(private readonly store: Pick<ClickHouseStore, "client" | "database">) {}

  async accept(owner: ExportOwner, request: ExportRequest, body: OtlpBody, projects: ExportProjects): Promise<ExportOutcome> {
    const decoded = decode(body);
    const rejections: string[] = [];
    let ignored = 0;
    const rows: SpanContentRow[] = [];
    for (const resourceLogs of decoded.resourceLogs) {
      const resourceProject = attributeText(resourceLogs.resource.get(PROJECT_ATTRIBUTE)) || request.project || "";
      for (const record of resourceLogs.records) {
        const content = mapLogRecord(record);
        if (!content) {
          ignored++;
          continue;
        }
        const problem = unlinked(record);
        if (problem) {
          rejections.push(`${record.eventName} record ${problem}`);
          continue;
        }
        const reference = attributeText(record.attributes.get(PROJECT_ATTRIBUTE)) || resourceProject;
        const project = projects.known(reference) ?? (await projects.resolve(reference));
        if (typeof project === "string") {
          rejections.push(`record of span ${record.spanId}: ${project}`);
          continue;
        }
        const redact = (text: string) => (text && !project.redactor.isNoop ? project.redactor.redactText(text) : text);
        const text = [messagesText(content.input), messagesText(content.output)].filter((lines) => lines !== "").join("\n");
        rows.push({
          organization_id: owner.organizationId,
          project_id: project.ref.id,
          trace_id: record.traceId,
          span_id: record.spanId,
          record_time: clickHouseNanos(record.timeUnixNano),
          record_index: rows.length,
          record_hash: recordHash(record),
          event_name: record.eventName,
          system_instructions: redact(jsonOrEmpty(content.system)),
          input_messages: redact(jsonOrEmpty(content.input)),
          output_messages: redact(jsonOrEmpty(content.output)),
          message_text: redact(text),
          finish_reasons: content.finishReasons,
          retention_days: 0,
        });
      }
    }
    if (ignored > 0) rejections.push(ignored === 1 ? "1 log record is not a GenAI message event: not stored" : `${ignored} log records are not GenAI message events: not stored`);
    const rejected = rejections.length - (ignored > 0 ? 1 : 0) + ignored;
    if (rows.length === 0 && rejected === 0) return { rejected: 0, errorMessage: "" };
    if (rows.length === 0 && ignored === 0) throw badRequest(`All log records rejected: ${summarize(rejections)}`);
    if (rows.length > 0) {
      try {
        await this.store.client.insert({ table: `${this.store.database}.span_contents`, values: rows, format: "JSONEachRow" });
      } catch (error) {
        throw saturated(new BackpressureError("storage", 5, { cause: error }));
      }
    }
    return { rejected, errorMessage: summarize(rejections) };
  }
}

function decode(body: OtlpBody): DecodedLogs {
  try {
    return decodeLogs(body.encoding, body.bytes);
  } catch (error) {
    if (error instanceof DecodeError) throw badRequest(`Cannot decode OTLP ${body.encoding} logs body: ${error.message}`);
    throw error;
  }
}
