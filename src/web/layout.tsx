import type { Children } from "@kitajs/html";
import type { SessionUser } from "./people";

/**
 * The one layout of the console. Dynamic text goes through `safe` (KitaJS escapes attributes
 * always, children only when asked), so every value a user or client chose is escaped.
 */
export function Layout(props: { title: string; session?: SessionUser | null; csrf?: string; children?: Children }) {
  return (
    <>
      {"<!doctype html>"}
      <html lang="en">
        <head>
          <meta charset="utf-8" />
          <meta name="viewport" content="width=device-width, initial-scale=1" />
          <title safe>{`${props.title} · Vigil`}</title>
          <style>{styles}</style>
          <script src="/assets/htmx.js" defer></script>
        </head>
        <body hx-boost="true">
          <header>
            <strong>Vigil</strong>
            {props.session ? (
              <nav aria-label="Console">
                <a href="/settings/keys">Keys</a>
                <a href="/settings/members">Members</a>
                <span safe>{props.session.email}</span>
                {props.session.memberships.length > 1 && props.csrf ? (
                  <form method="post" action="/settings/organization" class="inline">
                    <input type="hidden" name="csrf" value={props.csrf} />
                    <label for="organization">Organization</label>
                    <select id="organization" name="organizationId">
                      {props.session.memberships.map((m) => (
                        <option value={m.id} selected={m.id === props.session!.organization?.id} safe>
                          {m.name}
                        </option>
                      ))}
                    </select>
                    <button type="submit">Switch</button>
                  </form>
                ) : (
                  ""
                )}
                <a href="/logout">Sign out</a>
              </nav>
            ) : (
              ""
            )}
          </header>
          <main>
            <h1 safe>{props.title}</h1>
            {props.children}
          </main>
        </body>
      </html>
    </>
  );
}

export const Csrf = (props: { token: string }) => <input type="hidden" name="csrf" value={props.token} />;

/** A POST form carrying the page's CSRF token; `confirm` asks before htmx submits it, `boost: false` submits it as a plain page load. */
export function PostForm(props: { csrf: string; action?: string; class?: string; confirm?: string; boost?: false; children?: Children }) {
  return (
    <form method="post" action={props.action} class={props.class} hx-confirm={props.confirm} hx-boost={props.boost === false ? "false" : undefined}>
      <Csrf token={props.csrf} />
      {props.children}
    </form>
  );
}

export function ErrorMessage(props: { message?: string | null }) {
  return props.message ? (
    <p class="error" role="alert" safe>
      {props.message}
    </p>
  ) : (
    ""
  );
}

const styles = `
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; color: #1a1a1a; background: #fff; }
header { display: flex; gap: 1rem; align-items: center; padding: .75rem 1.5rem; border-bottom: 1px solid #ccc; }
nav { display: flex; gap: 1rem; align-items: center; margin-left: auto; }
main { max-width: 48rem; margin: 2rem auto; padding: 0 1rem; }
a { color: #0b4fa8; }
a:focus, button:focus, input:focus, select:focus { outline: 3px solid #f5a623; outline-offset: 2px; }
label { display: block; margin-top: 1rem; font-weight: 600; }
input, select { padding: .5rem; font: inherit; border: 1px solid #555; border-radius: 4px; }
input[type=email], input[type=password], input[type=text] { width: 100%; box-sizing: border-box; }
button { margin-top: 1rem; padding: .5rem 1rem; font: inherit; cursor: pointer; border: 1px solid #0b4fa8; background: #0b4fa8; color: #fff; border-radius: 4px; }
button.secondary { background: #fff; color: #0b4fa8; }
form.inline { display: inline-flex; gap: .5rem; align-items: center; margin: 0; }
form.inline label, form.inline button { margin: 0; }
table { border-collapse: collapse; width: 100%; margin-top: 1rem; }
th, td { text-align: left; padding: .4rem .5rem; border-bottom: 1px solid #ddd; vertical-align: top; }
.error { color: #b00020; font-weight: 600; }
.notice { background: #eef6ee; border: 1px solid #2e7d32; padding: .75rem; }
code { background: #f3f3f3; padding: .1rem .3rem; word-break: break-all; }
`;
