import { t, type TSchema } from "elysia";
import { badRequest } from "./errors";

export const defaultPageLimit = 50;
export const maxPageLimit = 200;

// The range of `limit` is checked by pageLimit(): a bound in the query schema fails after Elysia's
// string-to-integer coercion, whose error no longer names the parameter.
export const PageQuery = t.Object({
  cursor: t.Optional(t.String({ description: "`nextCursor` of the previous page" })),
  limit: t.Optional(t.Integer({ description: `Page size, 1 to ${maxPageLimit}, default ${defaultPageLimit}` })),
});

export const Paginated = <T extends TSchema>(item: T) =>
  t.Object({ items: t.Array(item), nextCursor: t.Union([t.String(), t.Null()]), hasMore: t.Boolean() });

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
  hasMore: boolean;
}

export function pageLimit(limit: number | undefined): number {
  if (limit === undefined) return defaultPageLimit;
  if (!Number.isInteger(limit) || limit < 1 || limit > maxPageLimit) throw badRequest(`limit: must be an integer from 1 to ${maxPageLimit}`);
  return limit;
}

/** An opaque keyset cursor: the sort-key values of the last row of a page. */
export const encodeCursor = (key: string[]) => Buffer.from(JSON.stringify(key)).toString("base64url");

export function decodeCursor(cursor: string, keyLength: number): string[] {
  try {
    const key: unknown = JSON.parse(Buffer.from(cursor, "base64url").toString("utf8"));
    if (Array.isArray(key) && key.length === keyLength && key.every((part) => typeof part === "string")) return key;
  } catch {
    // fall through to the 400 below
  }
  throw notACursor();
}

const notACursor = () => badRequest("cursor: is not a cursor returned by this list");

/** A cursor part holding a UTC timestamp to the microsecond (`2026-01-02T03:04:05.123456Z`), a real instant of years 1–9999. */
export function cursorTimestamp(part: string): string {
  const match = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.\d{6}Z$/.exec(part);
  if (!match) throw notACursor();
  const [, year, month, day, hour, minute, second] = match.map(Number) as number[];
  const date = new Date(Date.UTC(year!, month! - 1, day!, hour!, minute!, second!));
  date.setUTCFullYear(year!);
  const real = year! >= 1 && date.getUTCMonth() === month! - 1 && date.getUTCDate() === day! && date.getUTCHours() === hour! && date.getUTCMinutes() === minute! && date.getUTCSeconds() === second!;
  if (!real) throw notACursor();
  return part;
}

/** Microseconds since the epoch up to the year 9999: what a cursor of PostgreSQL timestamps holds. */
const maxCursorMicros = 253_402_300_800_000_000n;

/** A cursor part holding microseconds since the epoch, within PostgreSQL's timestamps. */
export function cursorMicros(part: string): string {
  if (!/^\d{1,18}$/.test(part) || BigInt(part) >= maxCursorMicros) throw notACursor();
  return part;
}

/** Builds a page from up to `limit + 1` rows fetched in sort order; the extra row only says there is more. */
export function toPage<Row, Item>(rows: Row[], limit: number, item: (row: Row) => Item, sortKey: (row: Row) => string[]): Page<Item> {
  const hasMore = rows.length > limit;
  const pageRows = hasMore ? rows.slice(0, limit) : rows;
  const last = pageRows.at(-1);
  return { items: pageRows.map(item), nextCursor: hasMore && last ? encodeCursor(sortKey(last)) : null, hasMore };
}
