import { createHash } from "node:crypto";
import { badRequest } from "../../lib/errors";
import type { SortDirection, SortField } from "./model";

/**
 * The opaque cursor of a trace list walk: the sort key of the last row, its trace id as tiebreaker,
 * the ClickHouse instant of the first page (the walk's snapshot) and a fingerprint of the query and
 * filters it was started with.
 */
export interface TraceCursor {
  sortBy: SortField;
  direction: SortDirection;
  key: string[];
  traceId: string;
  snapshot: string;
  fingerprint: string;
}

const version = 1;
const snapshotFormat = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}$/;

export const walkFingerprint = (query: string, filters: unknown) =>
  createHash("sha256").update(JSON.stringify([query, filters ?? {}])).digest("base64url").slice(0, 16);

export function encodeTraceCursor(cursor: TraceCursor): string {
  const { sortBy, direction, key, traceId, snapshot, fingerprint } = cursor;
  return Buffer.from(JSON.stringify([version, sortBy, direction, key, traceId, snapshot, fingerprint])).toString("base64url");
}

const invalid = () => badRequest("cursor: is not a cursor returned by this list");

/** Decodes a cursor and checks it continues the same walk: same sort, direction, query and filters. */
export function decodeTraceCursor(text: string, expected: Pick<TraceCursor, "sortBy" | "direction" | "fingerprint">): TraceCursor {
  let parts: unknown;
  try {
    parts = JSON.parse(Buffer.from(text, "base64url").toString("utf8"));
  } catch {
    throw invalid();
  }
  if (!Array.isArray(parts) || parts.length !== 7 || parts[0] !== version) throw invalid();
  const [, sortBy, direction, key, traceId, snapshot, fingerprint] = parts as unknown[];
  if (
    !Array.isArray(key) ||
    !key.every((part) => typeof part === "string") ||
    typeof traceId !== "string" ||
    typeof snapshot !== "string" ||
    !snapshotFormat.test(snapshot) ||
    typeof fingerprint !== "string"
  ) {
    throw invalid();
  }
  if (sortBy !== expected.sortBy || direction !== expected.direction || fingerprint !== expected.fingerprint) {
    throw badRequest("cursor: belongs to a list with another sort, query or filters; start again without a cursor");
  }
  return { sortBy: expected.sortBy, direction: expected.direction, key, traceId, snapshot, fingerprint };
}
