import { newId } from "./ids";

export function isUniqueViolation(error: unknown, constraint: string): boolean {
  return (error as { code?: string; constraint_name?: string }).code === "23505" && (error as { constraint_name?: string }).constraint_name === constraint;
}

/**
 * Runs `write` with the slug `base`, or, while `constraint` (a unique index on the slug) refuses it,
 * with `base` plus a short random suffix: the slug of a named resource unique within its parent.
 */
export async function withFreeSlug<T>(base: string, constraint: string, write: (slug: string) => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    const slug = attempt === 0 ? base : `${base}-${newId().slice(-6)}`;
    try {
      return await write(slug);
    } catch (error) {
      if (isUniqueViolation(error, constraint) && attempt < 5) continue;
      throw error;
    }
  }
}
