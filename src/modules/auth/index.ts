import { Elysia } from "elysia";
import type { AuthService, Principal } from "./service";

/**
 * Resolves the caller's principal for every route of the module registered after it; 401 otherwise.
 *
 * The check comes before anything looks at the request's content, so a caller without a valid key
 * learns nothing but 401: `derive` runs in the transform phase, ahead of the routes' own transform
 * hooks and of schema validation. Parsing comes earlier still, so for a request with a body the
 * parse hook checks the credential first and, when it fails, skips parsing; `derive` then answers 401.
 */
export const authGuard = (auth: AuthService) => {
  const principals = new WeakMap<Request, Promise<Principal>>();
  const principalOf = (request: Request) => {
    let principal = principals.get(request);
    if (!principal) {
      principal = auth.fromHeader(request.headers.get("authorization"));
      principals.set(request, principal);
    }
    return principal;
  };
  return new Elysia({ name: "auth-guard", seed: auth })
    .onParse({ as: "scoped" }, async ({ request }) => {
      const authenticated = await principalOf(request).then(
        () => true,
        () => false,
      );
      // Any value other than undefined stands for the parsed body and stops the body parsers.
      return authenticated ? undefined : null;
    })
    .derive({ as: "scoped" }, async ({ request }) => ({ principal: await principalOf(request) }));
};
