import { t, ValidationError, type TSchema } from "elysia";
import { ValueErrorType } from "@sinclair/typebox/errors";
import { Value } from "@sinclair/typebox/value";
import { badRequest } from "./errors";

/**
 * Elysia removes body properties a schema does not declare before validating, so a misspelt
 * settings key would be ignored in silence. Used as a route's `transform` hook, which runs before
 * validation, this rejects such a body with the usual 400 naming the field instead.
 */
export const rejectUndeclaredProperties =
  (schema: TSchema) =>
  ({ body }: { body: unknown }) => {
    if (!Value.Check(schema, body)) throw new ValidationError("body", schema, body);
  };

/**
 * Text PostgreSQL and JSON can both store: no NUL character and no unpaired UTF-16 surrogate (JSON
 * can carry both as escapes; PostgreSQL refuses them). Matched without the `u` flag, code unit by
 * code unit, so a lone surrogate is seen as one.
 */
const storableTextPattern = "^(?:[^\\u0000\\uD800-\\uDFFF]|[\\uD800-\\uDBFF][\\uDC00-\\uDFFF])*$";
const storableText = new RegExp(storableTextPattern);

/** Size limits of stored API text: what a person writes in a feedback box, or a client attaches as metadata. */
export const textLimits = {
  /** Score and annotation feedback, characters. */
  feedback: 10_000,
  /** Score metadata as JSON, bytes. */
  metadataBytes: 64 << 10,
} as const;

/** A string field stored as text: storable characters only, at most `maxLength` of them. */
export const StoredText = (options: { maxLength: number; minLength?: number; description?: string }) =>
  t.String({ ...options, pattern: storableTextPattern });

/**
 * A JSON object stored as is (score metadata): at most `maxBytes` of JSON, every key and string value
 * storable text. Throws a 400 naming the field.
 */
export function checkStoredJson(field: string, value: unknown, maxBytes: number): void {
  if (value === undefined) return;
  const json = JSON.stringify(value);
  if (Buffer.byteLength(json) > maxBytes) throw badRequest(`${field}: must be at most ${maxBytes} bytes of JSON`);
  const visit = (node: unknown, path: string): void => {
    if (typeof node === "string") {
      if (!storableText.test(node)) throw badRequest(`${path}: ${unstorableText}`);
    } else if (Array.isArray(node)) {
      node.forEach((item, index) => visit(item, `${path}[${index}]`));
    } else if (node && typeof node === "object") {
      for (const [key, item] of Object.entries(node)) {
        if (!storableText.test(key)) throw badRequest(`${path}: a key ${unstorableText}`);
        visit(item, `${path}.${key}`);
      }
    }
  };
  visit(value, field);
}

const unstorableText = "must not contain NUL characters or unpaired surrogates";

interface SchemaFacts {
  type?: string;
  pattern?: string;
  maxLength?: number;
  enum?: unknown[];
  minimum?: number;
  maximum?: number;
  maxItems?: number;
  anyOf?: SchemaFacts[];
  properties?: Record<string, unknown>;
}

/** Plain words for the errors whose TypeBox wording says little (unknown keys, enums, coerced integers). */
export function describeValueError(error: { type?: number; summary?: string; message?: string; schema?: SchemaFacts }): string {
  const schema = error.schema ?? {};
  if (error.type === ValueErrorType.ObjectAdditionalProperties) {
    const known = Object.keys(schema.properties ?? {});
    return known.length ? `is not a known field (expected one of: ${known.join(", ")})` : "is not a known field";
  }
  if (error.type === ValueErrorType.ArrayMaxItems) return `must have at most ${schema.maxItems} items`;
  if (error.type === ValueErrorType.StringPattern && schema.pattern === storableTextPattern) return unstorableText;
  if (error.type === ValueErrorType.StringMaxLength) return `must be at most ${schema.maxLength} characters`;
  if (schema.enum) return `must be one of: ${schema.enum.join(", ")}`;
  const integer = schema.type === "integer" ? schema : schema.anyOf?.find((option) => option.type === "integer");
  if (integer) {
    const { minimum: min, maximum: max } = integer;
    const range = min !== undefined && max !== undefined ? ` from ${min} to ${max}` : min !== undefined ? ` of at least ${min}` : max !== undefined ? ` of at most ${max}` : "";
    return `must be an integer${range}`;
  }
  return error.summary ?? error.message ?? "is invalid";
}

/**
 * Every API body is a JSON object (or a form). Elysia's validation would turn `[]` or `"x"` into `{}`
 * and silently drop a `__proto__` key (a filter field, a metadata key) instead of refusing it: checked
 * first, on the parsed body, with a 400 naming the key.
 */
export function checkBodyShape(body: unknown): void {
  if (body === undefined) return;
  if (typeof body !== "object" || body === null || Array.isArray(body)) throw badRequest("body: must be a JSON object");
  const visit = (node: unknown, path: string): void => {
    if (Array.isArray(node)) return node.forEach((item, index) => visit(item, `${path}[${index}]`));
    if (!node || typeof node !== "object") return;
    for (const [key, value] of Object.entries(node)) {
      const at = path ? `${path}.${key}` : key;
      if (key === "__proto__") throw badRequest(`${at}: is not a known field`);
      visit(value, at);
    }
  };
  visit(body, "");
}

/** A name trimmed, or a 400 naming the field: blank, or holding NUL, which JSON can carry but PostgreSQL text cannot. */
export function requiredName(field: string, value: string): string {
  const trimmed = value.trim();
  if (!trimmed) throw badRequest(`${field}: must not be blank`);
  if (trimmed.includes("\u0000")) throw badRequest(`${field}: must not contain NUL characters`);
  return trimmed;
}
