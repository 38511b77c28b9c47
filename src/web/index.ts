import { html } from "@elysiajs/html";
import { Elysia, t, type Cookie } from "elysia";
import { join } from "node:path";
import type { Context } from "../context";
import { HttpError } from "../lib/errors";
import { constantTimeEqual, newToken } from "../lib/ids";
import { createMailer } from "../lib/mailer";
import { clientAddress } from "../lib/net";
import { RateLimiter } from "../lib/rate-limit";
import { ClaimForm, ClaimParams } from "../modules/account/model";
import { AccountService } from "../modules/account/service";
import { ApiKeysService } from "../modules/api-keys/service";
import { MembersService } from "../modules/members/service";
import { OAuthKeysService } from "../modules/oauth-keys/service";
import { People, type SessionUser } from "./people";
import {
  ClaimPage,
  ForgotPasswordPage,
  InvitationPage,
  KeysPage,
  LoginPage,
  LogoutPage,
  MembersPage,
  MessagePage,
  ResetPasswordPage,
} from "./pages";

export const sessionCookieName = "vigil_session";
export const csrfCookieName = "vigil_csrf";

/** Pages that handle credentials are never framed, cached or leaked through a referrer. */
export const pageHeaders = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-store",
  "referrer-policy": "no-referrer",
  "x-frame-options": "DENY",
  "x-content-type-options": "nosniff",
  "content-security-policy": "default-src 'none'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self'; connect-src 'self'; form-action 'self' http: https:; frame-ancestors 'none'; base-uri 'none'",
};

/**
 * Page responses of the modules that use this (the console and the OAuth pages), rendered by
 * @elysiajs/html. Its automatic detection is a global hook (any string that looks like markup
 * anywhere, and the JSON bodies of unmatched routes, would be rewritten), so it is off: a scoped
 * hook hands only these modules' page strings to the plugin.
 */
export const htmlPages = new Elysia({ name: "html-pages" })
  .use(html({ autoDetect: false, contentType: pageHeaders["content-type"] }))
  // Given a string, the plugin's `html` always answers a Response (its type also covers streams).
  .mapResponse({ as: "scoped" }, ({ responseValue, html }) => (typeof responseValue === "string" ? (html(responseValue) as Response) : undefined));

type Cookies = Record<string, Cookie<unknown>>;
const cookieText = (cookie: Cookie<unknown> | undefined) => (typeof cookie?.value === "string" && cookie.value ? cookie.value : undefined);

/**
 * Double-submit CSRF protection: a random token in a cookie and in every form; a post whose form
 * token does not match its cookie, or that a browser marks cross-site, is refused.
 */
export function createCsrf(secure: boolean) {
  return {
    token(cookie: Cookies): string {
      const existing = cookieText(cookie[csrfCookieName]);
      if (typeof existing === "string" && existing.length >= 32) return existing;
      const token = newToken("csrf", 24);
      cookie[csrfCookieName]!.set({ value: token, httpOnly: true, sameSite: "lax", secure, path: "/" });
      return token;
    },
    check(cookie: Cookies, request: Request, formToken: unknown) {
      const expected = cookieText(cookie[csrfCookieName]);
      const crossSite = request.headers.get("sec-fetch-site") === "cross-site";
      if (crossSite || typeof expected !== "string" || typeof formToken !== "string" || !constantTimeEqual(expected, formToken)) {
        throw new HttpError(403, "This form expired or came from another site; reload the page and try again");
      }
    },
  };
}

/** A local path to return to after signing in; anything else (another host, `//x`, `/\x`) falls back. */
export function safeNext(next: unknown, fallback = "/settings/keys"): string {
  return typeof next === "string" && /^\/(?![/\\])/.test(next) && !/[\r\n]/.test(next) ? next : fallback;
}

/** Session handling shared by the console pages and the OAuth consent page. */
export function createSessions(ctx: Context, people: People) {
  const secure = ctx.config.publicUrl.startsWith("https:");
  return {
    secure,
    current: (cookie: Cookies) => people.session(cookieText(cookie[sessionCookieName])),
    async start(cookie: Cookies, userId: string, organizationId: string | null = null) {
      const { token, maxAgeSeconds } = await people.startSession(userId, organizationId);
      cookie[sessionCookieName]!.set({ value: token, httpOnly: true, sameSite: "lax", secure, path: "/", maxAge: maxAgeSeconds });
    },
    async end(cookie: Cookies) {
      await people.endSession(cookieText(cookie[sessionCookieName]));
      cookie[sessionCookieName]!.set({ value: "", httpOnly: true, sameSite: "lax", secure, path: "/", maxAge: 0 });
    },
  };
}

export const loginRedirect = (request: Request) => {
  const url = new URL(request.url);
  return `/login?next=${encodeURIComponent(url.pathname + url.search)}`;
};

/** A form with nothing but its CSRF token; browsers may send such a post with an empty body. */
const CsrfOnlyForm = t.Optional(t.Object({ csrf: t.Optional(t.String()) }));

const htmxPath = join(import.meta.dir, "..", "..", "node_modules", "htmx.org", "dist", "htmx.min.js");

/** The console: sign-in, password reset, claim, invitations, keys and members pages. */
export function webModule(ctx: Context, people: People) {
  const { sql, config, log, auth } = ctx;
  const mailer = createMailer(config, log);
  ctx.onShutdown(() => mailer.drain());
  const account = new AccountService(sql, config, mailer, new RateLimiter(sql), log);
  const members = new MembersService(sql, config, mailer, log);
  const apiKeys = new ApiKeysService(sql, auth);
  const oauthKeys = new OAuthKeysService(sql);
  const sessions = createSessions(ctx, people);
  const csrf = createCsrf(sessions.secure);
  const addressOf = (request: Request, server: { requestIP(r: Request): { address: string } | null } | null) =>
    clientAddress(server?.requestIP(request)?.address ?? null, request.headers.get("x-forwarded-for"), config.trustedProxies);
  const errorText = (error: unknown) => {
    if (error instanceof HttpError && error.status < 500 && error.status !== 403) return error.message;
    throw error;
  };

  /** A settings page needs a session with an organization; otherwise sign in first. */
  async function signedIn(cookie: Cookies, request: Request): Promise<SessionUser & { organization: NonNullable<SessionUser["organization"]> }> {
    const session = await sessions.current(cookie);
    if (!session) throw new HttpError(303, "Sign in first", { location: loginRedirect(request) });
    if (!session.organization) throw new HttpError(403, "You are not a member of any organization");
    return session as SessionUser & { organization: NonNullable<SessionUser["organization"]> };
  }
  const actorOf = (session: SessionUser) => ({ userId: session.userId, role: session.organization?.role ?? null });
  const managing = (session: SessionUser) => {
    if (session.organization?.role === "member") throw new HttpError(403, "Only owners and admins manage keys");
  };

  async function keysPage(cookie: Cookies, session: SessionUser & { organization: { id: string } }, extra: { created?: { name: string; token: string }; error?: string } = {}) {
    return KeysPage({
      session,
      csrf: csrf.token(cookie),
      apiKeys: await apiKeys.list(session.organization.id),
      oauthKeys: await oauthKeys.list(session.organization.id),
      ...extra,
    });
  }
  async function membersPage(cookie: Cookies, session: SessionUser & { organization: { id: string } }, extra: { error?: string; notice?: string } = {}) {
    return MembersPage({ session, csrf: csrf.token(cookie), members: await members.list(session.organization.id), ...extra });
  }

  return (
    new Elysia({ name: "web", detail: { hide: true } })
      .use(htmlPages)
      // htmx from its npm package, registered before the page headers apply.
      .get("/assets/htmx.js", () => new Response(Bun.file(htmxPath), { headers: { "content-type": "text/javascript; charset=utf-8", "cache-control": "public, max-age=86400" } }))
      .onAfterHandle(({ set }) => {
        Object.assign(set.headers, pageHeaders);
      })
      .get("/", async ({ cookie, redirect }) => redirect((await sessions.current(cookie)) ? "/settings/keys" : "/login", 303))
      .get("/login", async ({ cookie, query, redirect }) => {
        const next = safeNext(query.next);
        if (await sessions.current(cookie)) return redirect(next, 303);
        return LoginPage({ csrf: csrf.token(cookie), next });
      })
      .post(
        "/login",
        async ({ cookie, body, request, server, redirect, set }) => {
          csrf.check(cookie, request, body?.csrf);
          const next = safeNext(body.next);
          try {
            const userId = await people.signIn(body.email, body.password, addressOf(request, server));
            if (userId) {
              await sessions.start(cookie, userId);
              return redirect(next, 303);
            }
            set.status = 400;
            return LoginPage({ csrf: csrf.token(cookie), next, email: body.email, error: "Wrong email or password" });
          } catch (error) {
            if (!(error instanceof HttpError) || error.status !== 429) throw error;
            set.status = 429;
            set.headers["retry-after"] = error.headers["Retry-After"]!;
            return LoginPage({ csrf: csrf.token(cookie), next, email: body.email, error: error.message });
          }
        },
        { body: t.Object({ email: t.String({ maxLength: 320 }), password: t.String({ maxLength: 256 }), next: t.Optional(t.String()), csrf: t.Optional(t.String()) }) },
      )
      .get("/logout", async ({ cookie, request }) => {
        const session = await sessions.current(cookie);
        if (!session) throw new HttpError(303, "Signed out", { location: "/login" });
        return LogoutPage({ csrf: csrf.token(cookie), session });
      })
      .post(
        "/logout",
        async ({ cookie, body, request, redirect }) => {
          csrf.check(cookie, request, body?.csrf);
          await sessions.end(cookie);
          return redirect("/login", 303);
        },
        { body: CsrfOnlyForm },
      )
      .get("/password/forgot", ({ cookie }) => ForgotPasswordPage({ csrf: csrf.token(cookie) }))
      .post(
        "/password/forgot",
        async ({ cookie, body, request, set }) => {
          csrf.check(cookie, request, body?.csrf);
          try {
            await people.requestPasswordReset(body.email);
            return ForgotPasswordPage({ csrf: csrf.token(cookie), sent: true });
          } catch (error) {
            set.status = 400;
            return ForgotPasswordPage({ csrf: csrf.token(cookie), error: errorText(error) });
          }
        },
        { body: t.Object({ email: t.String({ maxLength: 320 }), csrf: t.Optional(t.String()) }) },
      )
      .get("/password/reset/:token", async ({ cookie, params, set }) => {
        if (await people.resetIsOpen(params.token)) return ResetPasswordPage({ csrf: csrf.token(cookie) });
        set.status = 410;
        return MessagePage({ title: "Link expired", message: "This reset link was used or has expired.", link: { href: "/password/forgot", text: "Ask for a new one" } });
      })
      .post(
        "/password/reset/:token",
        async ({ cookie, params, body, request, set, redirect }) => {
          csrf.check(cookie, request, body?.csrf);
          try {
            const userId = await people.resetPassword(params.token, body.password);
            if (!userId) {
              set.status = 410;
              return MessagePage({ title: "Link expired", message: "This reset link was used or has expired.", link: { href: "/password/forgot", text: "Ask for a new one" } });
            }
            await sessions.start(cookie, userId);
            return redirect("/settings/keys", 303);
          } catch (error) {
            set.status = 400;
            return ResetPasswordPage({ csrf: csrf.token(cookie), error: errorText(error) });
          }
        },
        { body: t.Object({ password: t.String({ maxLength: 256 }), csrf: t.Optional(t.String()) }) },
      )
      .get("/claim/:token", async ({ cookie, params, set }) => {
        const view = await account.claimView(params.token);
        if (!view) {
          set.status = 404;
          return MessagePage({ title: "Claim link not found", message: "This claim link is not valid. Check that you copied all of it." });
        }
        if (view.status === "claimed") {
          set.status = 409;
          return MessagePage({ title: "Already claimed", message: `The organization ${view.organizationName} has already been claimed.`, link: { href: "/login", text: "Sign in" } });
        }
        if (view.status === "expired") {
          set.status = 410;
          return MessagePage({ title: "Claim link expired", message: `This link expired at ${view.expiresAt.toISOString()}; the organization ${view.organizationName} is being deleted.` });
        }
        return ClaimPage({ view, csrf: csrf.token(cookie) });
      }, { params: ClaimParams })
      .post(
        "/claim/:token",
        async ({ cookie, params, body, request, set, redirect }) => {
          csrf.check(cookie, request, body?.csrf);
          try {
            const outcome = await account.claim(params.token, body);
            if (outcome.claimed) {
              await sessions.start(cookie, outcome.userId, outcome.organizationId);
              return redirect("/settings/keys", 303);
            }
            set.status = !outcome.view ? 404 : outcome.view.status === "claimed" ? 409 : 410;
            return MessagePage({ title: "This link no longer works", message: outcome.view ? `The claim link is ${outcome.view.status}.` : "This claim link is not valid." });
          } catch (error) {
            const message = errorText(error);
            const view = await account.claimView(params.token);
            if (!view) throw error;
            set.status = 400;
            return ClaimPage({ view, csrf: csrf.token(cookie), error: message, email: body.email, name: body.name });
          }
        },
        { params: ClaimParams, body: ClaimForm },
      )
      .get("/claim", () =>
        MessagePage({
          title: "Claim an organization",
          message: "A temporary organization is claimed with the link mailed to you (or returned by the account bootstrap as claimUrl). Open that link to take ownership.",
        }),
      )
      .get("/invitations/:token", async ({ cookie, params, set }) => {
        const view = await members.invitation(params.token);
        if (!view) {
          set.status = 410;
          return MessagePage({ title: "Invitation not valid", message: "This invitation was used, cancelled or has expired." });
        }
        return InvitationPage({ view, csrf: csrf.token(cookie) });
      })
      .post(
        "/invitations/:token",
        async ({ cookie, params, body, request, set, redirect }) => {
          csrf.check(cookie, request, body?.csrf);
          try {
            const accepted = await members.accept(params.token, body.password, body.name?.trim() || null);
            if (!accepted) {
              set.status = 410;
              return MessagePage({ title: "Invitation not valid", message: "This invitation was used, cancelled or has expired." });
            }
            await sessions.start(cookie, accepted.userId, accepted.organizationId);
            return redirect("/settings/members", 303);
          } catch (error) {
            const message = errorText(error);
            const view = await members.invitation(params.token);
            if (!view) throw error;
            set.status = 400;
            return InvitationPage({ view, csrf: csrf.token(cookie), error: message });
          }
        },
        { body: t.Object({ password: t.String({ maxLength: 256 }), name: t.Optional(t.String({ maxLength: 256 })), csrf: t.Optional(t.String()) }) },
      )
      .post(
        "/settings/organization",
        async ({ cookie, body, request, redirect }) => {
          csrf.check(cookie, request, body?.csrf);
          const session = await signedIn(cookie, request);
          await people.switchOrganization(session, body.organizationId);
          return redirect("/settings/keys", 303);
        },
        { body: t.Object({ organizationId: t.String(), csrf: t.Optional(t.String()) }) },
      )
      .get("/settings/keys", async ({ cookie, request }) => keysPage(cookie, await signedIn(cookie, request)))
      .post(
        "/settings/keys",
        async ({ cookie, body, request, set }) => {
          csrf.check(cookie, request, body?.csrf);
          const session = await signedIn(cookie, request);
          managing(session);
          try {
            const key = await apiKeys.create(session.organization.id, body.name, session.userId);
            return keysPage(cookie, session, { created: { name: key.name, token: key.token } });
          } catch (error) {
            set.status = 400;
            return keysPage(cookie, session, { error: errorText(error) });
          }
        },
        { body: t.Object({ name: t.String({ maxLength: 256 }), csrf: t.Optional(t.String()) }) },
      )
      .post(
        "/settings/keys/:id/rename",
        async ({ cookie, body, params, request, redirect, set }) => {
          csrf.check(cookie, request, body?.csrf);
          const session = await signedIn(cookie, request);
          managing(session);
          try {
            await apiKeys.rename(session.organization.id, params.id, body.name);
            return redirect("/settings/keys", 303);
          } catch (error) {
            set.status = 400;
            return keysPage(cookie, session, { error: errorText(error) });
          }
        },
        { body: t.Object({ name: t.String({ maxLength: 256 }), csrf: t.Optional(t.String()) }) },
      )
      .post(
        "/settings/keys/:id/revoke",
        async ({ cookie, body, params, request, redirect }) => {
          csrf.check(cookie, request, body?.csrf);
          const session = await signedIn(cookie, request);
          managing(session);
          await apiKeys.revoke(session.organization.id, params.id);
          return redirect("/settings/keys", 303);
        },
        { body: CsrfOnlyForm },
      )
      .post(
        "/settings/oauth-keys/:id/revoke",
        async ({ cookie, body, params, request, redirect }) => {
          csrf.check(cookie, request, body?.csrf);
          const session = await signedIn(cookie, request);
          await oauthKeys.revoke(actorOf(session), session.organization.id, params.id);
          return redirect("/settings/keys", 303);
        },
        { body: CsrfOnlyForm },
      )
      .get("/settings/members", async ({ cookie, request }) => membersPage(cookie, await signedIn(cookie, request)))
      .post(
        "/settings/members",
        async ({ cookie, body, request, set }) => {
          csrf.check(cookie, request, body?.csrf);
          const session = await signedIn(cookie, request);
          try {
            const invited = await members.invite(actorOf(session), session.organization.id, { email: body.email, role: body.role });
            return membersPage(cookie, session, { notice: `Invitation sent to ${invited.email}.` });
          } catch (error) {
            set.status = error instanceof HttpError ? error.status : 500;
            return membersPage(cookie, session, { error: errorText(error) });
          }
        },
        { body: t.Object({ email: t.String({ maxLength: 320 }), role: t.Optional(t.UnionEnum(["owner", "admin", "member"])), csrf: t.Optional(t.String()) }) },
      )
      .post(
        "/settings/members/:id/role",
        async ({ cookie, body, params, request, redirect, set }) => {
          csrf.check(cookie, request, body?.csrf);
          const session = await signedIn(cookie, request);
          try {
            await members.updateRole(actorOf(session), session.organization.id, params.id, body.role);
            return redirect("/settings/members", 303);
          } catch (error) {
            set.status = error instanceof HttpError ? error.status : 500;
            return membersPage(cookie, session, { error: errorText(error) });
          }
        },
        { body: t.Object({ role: t.UnionEnum(["owner", "admin", "member"]), csrf: t.Optional(t.String()) }) },
      )
      .post(
        "/settings/members/:id/remove",
        async ({ cookie, body, params, request, redirect, set }) => {
          csrf.check(cookie, request, body?.csrf);
          const session = await signedIn(cookie, request);
          try {
            await members.remove(actorOf(session), session.organization.id, params.id);
            return redirect("/settings/members", 303);
          } catch (error) {
            set.status = error instanceof HttpError ? error.status : 500;
            return membersPage(cookie, session, { error: errorText(error) });
          }
        },
        { body: CsrfOnlyForm },
      )
  );
}
