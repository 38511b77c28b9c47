import type { ClaimView } from "./service";

const escapeHtml = (text: string) =>
  text.replace(/[&<>"']/g, (char) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[char]!);

// The URL carries the claim token: never send it as a referrer, never let another site frame the form.
const headers = {
  "content-type": "text/html; charset=utf-8",
  "cache-control": "no-store",
  "referrer-policy": "no-referrer",
  "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
};

function page(status: number, title: string, body: string): Response {
  const html = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(title)} · Vigil</title>
<style>
body { font: 16px/1.5 system-ui, sans-serif; max-width: 32rem; margin: 4rem auto; padding: 0 1rem; color: #1a1a1a; }
label { display: block; margin-top: 1rem; font-weight: 600; }
input { width: 100%; padding: .5rem; font: inherit; box-sizing: border-box; }
button { margin-top: 1.5rem; padding: .6rem 1.2rem; font: inherit; cursor: pointer; }
.error { color: #b00020; }
</style>
</head>
<body>
<h1>${escapeHtml(title)}</h1>
${body}
</body>
</html>`;
  return new Response(html, { status, headers });
}

/** The claim form, or why the link no longer works. */
export function claimPage(view: ClaimView | null, error?: { message: string; email: string; name: string }): Response {
  if (!view) return page(404, "Claim link not found", "<p>This claim link is not valid. Check that you copied all of it.</p>");
  const organization = `<strong>${escapeHtml(view.organizationName)}</strong>`;
  if (view.status === "claimed") return page(409, "Already claimed", `<p>The organization ${organization} has already been claimed.</p>`);
  if (view.status === "expired") {
    return page(410, "Claim link expired", `<p>This link expired at ${view.expiresAt.toISOString()}; the organization ${organization} is being deleted.</p>`);
  }
  const email = error?.email ?? view.email ?? "";
  return page(
    error ? 400 : 200,
    "Claim your organization",
    `<p>The organization ${organization} was created without an owner. Claim it to keep it; unclaimed, it is deleted at ${view.expiresAt.toISOString()}.</p>
${error ? `<p class="error">${escapeHtml(error.message)}</p>` : ""}
<form method="post">
<label for="email">Your email</label>
<input id="email" name="email" type="email" required value="${escapeHtml(email)}">
<label for="name">Your name (optional)</label>
<input id="name" name="name" type="text" value="${escapeHtml(error?.name ?? "")}">
<button type="submit">Claim organization</button>
</form>`,
  );
}

export const claimedPage = (organizationName: string) =>
  page(200, "Organization claimed", `<p>You now own <strong>${escapeHtml(organizationName)}</strong>. Its API keys and projects keep working.</p>`);
