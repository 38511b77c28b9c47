import { init } from "@paralleldrive/cuid2";
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";

/** CUID2 ids of 24 characters for organizations, projects, users, scores and the rest. */
export const newId = init({ length: 24 });

export const isCuid = (value: string) => /^[a-z][a-z0-9]{23}$/.test(value);

export const sha256Hex = (value: string) => createHash("sha256").update(value).digest("hex");

/** A random URL-safe secret token with a readable prefix, e.g. `vgl_…`. */
export const newToken = (prefix: string, bytes = 32) => `${prefix}_${randomBytes(bytes).toString("base64url")}`;

export function constantTimeEqual(a: string, b: string): boolean {
  const left = Buffer.from(a);
  const right = Buffer.from(b);
  if (left.length !== right.length) {
    timingSafeEqual(left, left);
    return false;
  }
  return timingSafeEqual(left, right);
}

export function slugify(name: string, fallback = "project"): string {
  const slug = name
    .normalize("NFKD")
    .replace(/[\u0300-\u036f]/g, "")
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "-")
    .replace(/^-+|-+$/g, "")
    .slice(0, 48)
    .replace(/-+$/g, "");
  return slug || fallback;
}
