import type { AttributeValue, Attributes } from "./attributes";

/**
 * What one span may store, applied before mapping, as OpenTelemetry's own span limits do: a longer
 * attribute value is cut and marked, attributes past the count are dropped and counted. Without
 * them one span could hold the whole request body (tens of MB) and every read of it would carry it.
 */
export interface SpanLimits {
  maxAttributeValueBytes: number;
  maxAttributesPerSpan: number;
}

/** Set on a span that lost attributes to `maxAttributesPerSpan`: how many. */
export const DROPPED_ATTRIBUTES_KEY = "vigil.dropped_attributes_count";
export const truncationMarker = (bytes: number) => `…[truncated ${bytes} bytes]`;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** The first `maxBytes` bytes of the text (whole characters only), then the marker naming what was cut. */
function truncateText(text: string, maxBytes: number): string {
  // No UTF-16 unit encodes to more than 3 bytes: shorter text cannot pass the limit.
  if (text.length * 3 <= maxBytes) return text;
  const bytes = encoder.encode(text);
  if (bytes.byteLength <= maxBytes) return text;
  const kept = new Uint8Array(maxBytes);
  const { written } = encoder.encodeInto(text, kept);
  return `${decoder.decode(kept.subarray(0, written))}${truncationMarker(bytes.byteLength - written)}`;
}

/** A structured value over the limit becomes its JSON text, truncated: its shape is lost, its start is kept. */
function limitValue(value: AttributeValue, maxBytes: number): AttributeValue {
  if (typeof value === "string") return truncateText(value, maxBytes);
  if (value === null || typeof value !== "object") return value;
  const json = JSON.stringify(value);
  return json.length * 3 <= maxBytes || encoder.encode(json).byteLength <= maxBytes ? value : truncateText(json, maxBytes);
}

/** The attributes within the limits; the same map when nothing had to change. */
export function limitAttributes(attributes: Attributes, limits: SpanLimits): Attributes {
  let limited: Attributes | null = null;
  let index = 0;
  for (const [key, value] of attributes) {
    if (index === limits.maxAttributesPerSpan) {
      limited ??= new Map([...attributes].slice(0, index));
      limited.set(DROPPED_ATTRIBUTES_KEY, attributes.size - index);
      break;
    }
    const kept = limitValue(value, limits.maxAttributeValueBytes);
    if (kept !== value) limited ??= new Map([...attributes].slice(0, index));
    limited?.set(key, kept);
    index++;
  }
  return limited ?? attributes;
}

/** Retention of a span that names none; the tables' TTL uses the same default. */
export const defaultRetentionDays = 90;

/** The span start times stored: retention reaches back, `maxFutureSkewMs` reaches ahead. */
export interface AcceptedWindow {
  maxFutureSkewMs: number;
  /** Retention when a span names none (its `retention_days` is 0). */
  defaultRetentionDays: number;
}

const nsPerMs = 1_000_000n;
const msPerDay = 86_400_000;

/**
 * Why a span starting at `startTimeUnixNano` would not be kept, or null when it would: older than its
 * retention (the TTL would delete it at once) or further ahead than the clock skew allowed (it would
 * top every list sorted by time until then).
 */
export function outsideWindow(startTimeUnixNano: string, retentionDays: number, window: AcceptedWindow, now = Date.now()): string | null {
  const startMs = Number(BigInt(startTimeUnixNano) / nsPerMs);
  const days = retentionDays || window.defaultRetentionDays;
  if (startMs < now - days * msPerDay) return `starts more than ${days} days ago (the retention); not stored`;
  if (startMs > now + window.maxFutureSkewMs) return `starts more than ${window.maxFutureSkewMs / 1000} s in the future; not stored`;
  return null;
}
