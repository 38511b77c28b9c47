import { escapeHtml } from "@kitajs/html";
import { Elysia, t } from "elysia";
import type { Context } from "../../context";
import { createMailer } from "../../lib/mailer";
import { EmailConfirmations } from "./service";

// The URL carries the secret: never send it as a referrer, never let another site frame the form.
const headers = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-store",
  "referrer-policy": "no-referrer",
  "content-security-policy": "default-src 'none'; form-action 'self'; frame-ancestors 'none'",
};

const page = (status: number, title: string, body: string) =>
  new Response(
    `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${escapeHtml(title)} · Vigil</title></head><body><h1>${escapeHtml(title)}</h1>${body}</body></html>`,
    { status, headers },
  );

const gone = () => page(404, "Link not valid", "<p>This confirmation link is not valid: it was used already, has expired, or was not copied whole.</p>");

const TokenQuery = t.Object({ token: t.String({ description: "Secret from the mailed link" }) });

/**
 * The mailed confirmation link. Opening it shows a button; only the form post confirms, so a mail
 * scanner that fetches links does not confirm an address on its owner's behalf.
 */
export const emailConfirmationsModule = ({ sql, config, log }: Context) => {
  const confirmations = new EmailConfirmations(sql, createMailer(config, log), config);
  return new Elysia({ name: "email-confirmations", detail: { tags: ["account"] } })
    .get(
      "/v1/email-confirmations/confirm",
      async ({ query }) =>
        (await confirmations.isPending(query.token))
          ? page(
              200,
              "Confirm your email address",
              `<form method="post"><input type="hidden" name="token" value="${escapeHtml(query.token)}"><button type="submit">Confirm this address</button></form>`,
            )
          : gone(),
      { query: TokenQuery, detail: { summary: "Email confirmation page", description: "Opened from the mailed link." } },
    )
    .post(
      "/v1/email-confirmations/confirm",
      async ({ body }) =>
        (await confirmations.confirm(body.token)) ? page(200, "Email address confirmed", "<p>Vigil may now send mail to this address.</p>") : gone(),
      { body: TokenQuery, detail: { summary: "Confirm an email address", description: "Form post of the confirmation page." } },
    );
};
