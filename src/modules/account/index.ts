import { Elysia, t } from "elysia";
import type { Context } from "../../context";
import { HttpError } from "../../lib/errors";
import { createMailer } from "../../lib/mailer";
import { clientAddress } from "../../lib/net";
import { RateLimiter } from "../../lib/rate-limit";
import { authGuard } from "../auth";
import { claimedPage, claimPage } from "./claim-page";
import { AccountResponse, BootstrapAccountBody, BootstrapAccountResponse, ClaimForm, ClaimParams } from "./model";
import { AccountService } from "./service";

/** Temporary accounts (bootstrap, claim page) and who the caller is. */
export const accountModule = ({ sql, config, log, auth, onShutdown }: Context) => {
  const mailer = createMailer(config, log);
  onShutdown(() => mailer.drain());
  const account = new AccountService(sql, config, mailer, new RateLimiter(sql), log);
  return new Elysia({ name: "account", detail: { tags: ["account"] } })
    .post(
      "/v1/account/bootstrap",
      async ({ body, request, server, status }) => {
        const address = clientAddress(server?.requestIP(request)?.address ?? null, request.headers.get("x-forwarded-for"), config.trustedProxies);
        return status(201, await account.bootstrap(body ?? {}, address));
      },
      {
        body: t.Optional(BootstrapAccountBody),
        response: { 201: BootstrapAccountResponse },
        detail: {
          summary: "Create a temporary account",
          description:
            "No authentication. Creates an organization with a project and an API key, and a claim link (emailed to `userEmail` when given) valid for 7 days; unclaimed, the organization is then deleted. Rate limited per client address (429 with `Retry-After`); behind `TRUSTED_PROXIES` the address comes from `X-Forwarded-For`.",
        },
      },
    )
    .get("/claim/:token", async ({ params }) => claimPage(await account.claimView(params.token)), {
      params: ClaimParams,
      detail: { summary: "Claim page", description: "HTML form to take ownership of a temporary organization." },
    })
    .post(
      "/claim/:token",
      async ({ params, body }) => {
        try {
          const outcome = await account.claim(params.token, body);
          return outcome.claimed ? claimedPage(outcome.organizationName) : claimPage(outcome.view);
        } catch (error) {
          if (!(error instanceof HttpError) || error.status !== 400) throw error;
          return claimPage(await account.claimView(params.token), { message: error.message, email: body.email, name: body.name ?? "" });
        }
      },
      { params: ClaimParams, body: ClaimForm, detail: { summary: "Claim a temporary organization", description: "Form post of the claim page." } },
    )
    .use(authGuard(auth))
    .get("/v1/account", ({ principal }) => account.account(principal), {
      response: AccountResponse,
      detail: { summary: "Who the credential is", description: "API keys belong to the organization: `user` and `role` are null for them." },
    });
};
