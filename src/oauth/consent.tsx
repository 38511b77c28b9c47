import { Csrf, Layout } from "../web/layout";
import type { SessionUser } from "../web/people";

const scopeMeaning: Record<string, string> = {
  openid: "Know who you are on Vigil",
  profile: "Read your name",
  email: "Read your email address",
  offline_access: "Stay connected until you revoke it (refresh tokens)",
};

/** The consent page: who asks, where the answer goes, what for, and in which organization. */
export function ConsentPage(props: { session: SessionUser; csrf: string; clientName: string; redirectHost: string; scopes: string[]; params: Record<string, string> }) {
  return (
    <Layout title="Connect an agent" session={props.session} csrf={props.csrf}>
      <p>
        <strong safe>{props.clientName}</strong> wants to act as <span safe>{props.session.email}</span> on Vigil: reading and writing what you
        can in the organization you choose. After you answer you are sent to <strong safe>{props.redirectHost}</strong>.
      </p>
      <h2>It asks to</h2>
      <ul>
        {props.scopes.map((scope) => (
          <li safe>{scopeMeaning[scope] ?? scope}</li>
        ))}
      </ul>
      <form method="post" action="/api/auth/mcp/authorize" hx-boost="false">
        <Csrf token={props.csrf} />
        {Object.entries(props.params).map(([name, value]) => (
          <input type="hidden" name={name} value={value} />
        ))}
        <label for="organization">Organization</label>
        <select id="organization" name="organization_id">
          {props.session.memberships.map((m) => (
            <option value={m.id} selected={m.id === props.session.organization?.id} safe>
              {`${m.name} (${m.role})`}
            </option>
          ))}
        </select>
        <p>
          <button type="submit" name="decision" value="allow">
            Allow
          </button>{" "}
          <button type="submit" name="decision" value="deny" class="secondary">
            Deny
          </button>
        </p>
      </form>
    </Layout>
  );
}
