import { ValidationError, type TSchema } from "elysia";
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

interface SchemaFacts {
  type?: string;
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
  if (schema.enum) return `must be one of: ${schema.enum.join(", ")}`;
  const integer = schema.type === "integer" ? schema : schema.anyOf?.find((option) => option.type === "integer");
  if (integer) {
    const { minimum: min, maximum: max } = integer;
    const range = min !== undefined && max !== undefined ? ` from ${min} to ${max}` : min !== undefined ? ` of at least ${min}` : max !== undefined ? ` of at most ${max}` : "";
    return `must be an integer${range}`;
  }
  return error.summary ?? error.message ?? "is invalid";
}

/** A name trimmed, or a 400 naming the field: blank, or holding NUL, which JSON can carry but PostgreSQL text cannot. */
export function requiredName(field: string, value: string): string {
  const trimmed = value.trim();
  if (!trimmed) throw badRequest(`${field}: must not be blank`);
  if (trimmed.includes("\u0000")) throw badRequest(`${field}: must not contain NUL characters`);
  return trimmed;
}
