/**
 * decode (logs): OTLP `ExportLogsServiceRequest` bodies (protobuf or JSON) to one normalized structure, ids as
 * lowercase hex and times as exact decimal nanoseconds, like spans (decode.ts). Log records arrive far less often
 * than spans, so protobuf goes through protobufjs over the vendored schema rather than a hand-written decoder.
 */
import { attributeText, type AttributeValue, type Attributes } from "./attributes";
import { jsonAnyValue, jsonArray, jsonAttributes, jsonId, jsonNanos, jsonObject, jsonString, optionalObject, parseJsonBody } from "./decode-json";
import { bytesToHex, DecodeError } from "./decode-model";
import { loadOtlpType, pbAnyValue, pbAttributes, unsignedDecimal, type LongValue, type PbAnyValue, type PbKeyValue } from "./decode-protobufjs";

export interface DecodedLogRecord {
  /** Unix epoch nanoseconds, decimal: the record's time, else when it was observed. */
  timeUnixNano: string;
  /** `event_name`, else the older `event.name` attribute; "" for a plain log line. */
  eventName: string;
  /** Hex ids of the span the record belongs to, "" when none. */
  traceId: string;
  spanId: string;
  body: AttributeValue;
  attributes: Attributes;
}

export interface DecodedResourceLogs {
  resource: Attributes;
  records: DecodedLogRecord[];
}

export interface DecodedLogs {
  resourceLogs: DecodedResourceLogs[];
  recordCount: number;
}

const ExportLogsServiceRequest = loadOtlpType("opentelemetry/proto/collector/logs/v1/logs_service.proto", "opentelemetry.proto.collector.logs.v1.ExportLogsServiceRequest");

interface PbLogRecord {
  timeUnixNano: LongValue | number;
  observedTimeUnixNano: LongValue | number;
  body?: PbAnyValue | null;
  attributes: PbKeyValue[];
  traceId: Uint8Array;
  spanId: Uint8Array;
  eventName: string;
}
interface PbLogsRequest {
  resourceLogs: { resource?: { attributes: PbKeyValue[] } | null; scopeLogs: { logRecords: PbLogRecord[] }[] }[];
}

function record(time: string, observed: string, eventName: string, traceId: string, spanId: string, body: AttributeValue, attributes: Attributes): DecodedLogRecord {
  return {
    timeUnixNano: time !== "0" ? time : observed,
    eventName: eventName || attributeText(attributes.get("event.name")),
    traceId,
    spanId,
    body,
    attributes,
  };
}

function decodeLogsProtobuf(bytes: Uint8Array): DecodedLogs {
  let request: PbLogsRequest;
  try {
    request = ExportLogsServiceRequest.decode(bytes) as unknown as PbLogsRequest;
  } catch (error) {
    throw new DecodeError(`Body is not a valid OTLP protobuf ExportLogsServiceRequest: ${(error as Error).message}`);
  }
  const logs: DecodedLogs = { resourceLogs: [], recordCount: 0 };
  for (const resourceLogs of request.resourceLogs) {
    const records = resourceLogs.scopeLogs.flatMap((scopeLogs) =>
      scopeLogs.logRecords.map((log) =>
        record(
          unsignedDecimal(log.timeUnixNano),
          unsignedDecimal(log.observedTimeUnixNano),
          log.eventName,
          bytesToHex(log.traceId),
          bytesToHex(log.spanId),
          pbAnyValue(log.body),
          pbAttributes(log.attributes),
        ),
      ),
    );
    logs.resourceLogs.push({ resource: pbAttributes(resourceLogs.resource?.attributes ?? []), records });
    logs.recordCount += records.length;
  }
  return logs;
}

function decodeLogsJson(bytes: Uint8Array): DecodedLogs {
  const request = parseJsonBody(bytes);
  const logs: DecodedLogs = { resourceLogs: [], recordCount: 0 };
  jsonArray(request.resourceLogs, "resourceLogs").forEach((item, r) => {
    const path = `resourceLogs[${r}]`;
    const resourceLogs = jsonObject(item, path);
    const resource = optionalObject(resourceLogs.resource, `${path}.resource`);
    const records: DecodedLogRecord[] = [];
    jsonArray(resourceLogs.scopeLogs, `${path}.scopeLogs`).forEach((item, s) => {
      const scopePath = `${path}.scopeLogs[${s}]`;
      jsonArray(jsonObject(item, scopePath).logRecords, `${scopePath}.logRecords`).forEach((item, l) => {
        const logPath = `${scopePath}.logRecords[${l}]`;
        const log = jsonObject(item, logPath);
        records.push(
          record(
            jsonNanos(log.timeUnixNano),
            jsonNanos(log.observedTimeUnixNano),
            jsonString(log.eventName),
            jsonId(log.traceId),
            jsonId(log.spanId),
            jsonAnyValue(log.body),
            jsonAttributes(log.attributes, `${logPath}.attributes`),
          ),
        );
      });
    });
    logs.resourceLogs.push({ resource: jsonAttributes(resource.attributes, `${path}.resource.attributes`), records });
    logs.recordCount += records.length;
  });
  return logs;
}

/** Throws DecodeError when the body is not an `ExportLogsServiceRequest`. */
export function decodeLogs(encoding: "protobuf" | "json", bytes: Uint8Array): DecodedLogs {
  return encoding === "protobuf" ? decodeLogsProtobuf(bytes) : decodeLogsJson(bytes);
}
