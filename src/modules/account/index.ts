import { Elysia, t } from "elysia";
import type { Context } from "../../context";
import { createMailer } from "../../lib/mailer";
import { clientAddress } from "../../lib/net";
import { RateLimiter } from "../../lib/rate-limit";
import { authGuard } from "../auth";
import { AccountResponse, BootstrapAccountBody, BootstrapAccountResponse, ReissueClaimBody, ReissueClaimResponse } from "./model";
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
          operationId: "bootstrapAccount",
          summary: "Create a temporary account",
          description:
            "No authentication. Creates an organization with a project and an API key, and a claim link (emailed to `userEmail` when given) valid for 7 days; unclaimed, the organization is then deleted. Rate limited per client address (429 with `Retry-After`); behind `TRUSTED_PROXIES` the address comes from `X-Forwarded-For`.",
        },
      },
    )
    .use(authGuard(auth))
    .get("/v1/account", ({ principal }) => account.account(principal), {
      response: AccountResponse,
      detail: {
        operationId: "getAccount",
        summary: "Who the credential is",
        description: "API keys belong to the organization: `user` and `role` are null for them. OAuth access tokens act for their user.",
      },
    })
    .post("/v1/account/claim", ({ principal, body }) => account.reissueClaim(principal.organizationId, body.email), {
      body: ReissueClaimBody,
      response: ReissueClaimResponse,
      detail: {
        operationId: "requestAccountClaim",
        summary: "Mail a new claim link",
        description:
          "For a temporary (bootstrap) organization still unclaimed: mails a fresh claim link to `email`, where a person takes ownership. Earlier links stop working. 400 once claimed.",
      },
    });
};
