import { Elysia } from "elysia";
import type { AuthService } from "./service";

/** Resolves the caller's principal for every route of the module that uses it; 401 otherwise. */
export const authGuard = (auth: AuthService) =>
  new Elysia({ name: "auth-guard", seed: auth }).resolve({ as: "scoped" }, async ({ headers }) => ({
    principal: await auth.fromHeader(headers.authorization),
  }));
