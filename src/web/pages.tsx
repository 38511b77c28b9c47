import type { ClaimView } from "../modules/account/service";
import type { ApiKeyListItem } from "../modules/api-keys/model";
import type { ActiveMember, InvitedMember } from "../modules/members/model";
import type { InvitationView } from "../modules/members/service";
import type { OAuthKey } from "../modules/oauth-keys/model";
import { ErrorMessage, Layout, PostForm } from "./layout";
import type { SessionUser } from "./people";

export function MessagePage(props: { title: string; message: string; link?: { href: string; text: string } }) {
  return (
    <Layout title={props.title}>
      <p safe>{props.message}</p>
      {props.link ? (
        <p>
          <a href={props.link.href} safe>
            {props.link.text}
          </a>
        </p>
      ) : (
        ""
      )}
    </Layout>
  );
}

export function LoginPage(props: { csrf: string; next: string; email?: string; error?: string | null }) {
  return (
    <Layout title="Sign in">
      <ErrorMessage message={props.error} />
      <PostForm csrf={props.csrf} action="/login" boost={false}>
        <input type="hidden" name="next" value={props.next} />
        <label for="email">Email</label>
        <input id="email" name="email" type="email" autocomplete="username" required autofocus value={props.email ?? ""} />
        <label for="password">Password</label>
        <input id="password" name="password" type="password" autocomplete="current-password" required />
        <button type="submit">Sign in</button>
      </PostForm>
      <p>
        <a href="/password/forgot">Forgot your password?</a>
      </p>
    </Layout>
  );
}

export function LogoutPage(props: { csrf: string; session: SessionUser }) {
  return (
    <Layout title="Sign out" session={props.session} csrf={props.csrf}>
      <PostForm csrf={props.csrf} action="/logout" boost={false}>
        <p safe>{`Signed in as ${props.session.email}.`}</p>
        <button type="submit">Sign out</button>
      </PostForm>
    </Layout>
  );
}

export function ForgotPasswordPage(props: { csrf: string; sent?: boolean; error?: string | null }) {
  return (
    <Layout title="Reset your password">
      <ErrorMessage message={props.error} />
      {props.sent ? <p class="notice">If that address has an account, a reset link is on its way. It works once, within an hour.</p> : ""}
      <PostForm csrf={props.csrf} action="/password/forgot">
        <label for="email">Email</label>
        <input id="email" name="email" type="email" autocomplete="username" required />
        <button type="submit">Send reset link</button>
      </PostForm>
    </Layout>
  );
}

export function ResetPasswordPage(props: { csrf: string; error?: string | null }) {
  return (
    <Layout title="Choose a new password">
      <ErrorMessage message={props.error} />
      <PostForm csrf={props.csrf} boost={false}>
        <label for="password">New password (at least 8 characters)</label>
        <input id="password" name="password" type="password" autocomplete="new-password" minlength="8" required />
        <button type="submit">Set password</button>
      </PostForm>
    </Layout>
  );
}

export function ClaimPage(props: { view: ClaimView; csrf: string; error?: string | null; email?: string; name?: string }) {
  return (
    <Layout title="Claim your organization">
      <p>
        The organization <strong safe>{props.view.organizationName}</strong> was created without an owner. Claim it to keep it; unclaimed, it
        is deleted at <span safe>{props.view.expiresAt.toISOString()}</span>.
      </p>
      <ErrorMessage message={props.error} />
      <PostForm csrf={props.csrf} boost={false}>
        <label for="email">Your email</label>
        <input id="email" name="email" type="email" autocomplete="username" required value={props.email ?? props.view.email ?? ""} />
        <label for="name">Your name (optional)</label>
        <input id="name" name="name" type="text" value={props.name ?? ""} />
        <label for="password">Password (new account: choose one of at least 8 characters; existing account: yours)</label>
        <input id="password" name="password" type="password" autocomplete="current-password" required />
        <button type="submit">Claim organization</button>
      </PostForm>
    </Layout>
  );
}

export function InvitationPage(props: { view: InvitationView; csrf: string; error?: string | null }) {
  const { view } = props;
  return (
    <Layout title="Join an organization">
      <p>
        <span safe>{view.email}</span> is invited to <strong safe>{view.organizationName}</strong> as <span safe>{view.role}</span>.
      </p>
      <ErrorMessage message={props.error} />
      <PostForm csrf={props.csrf} boost={false}>
        {view.hasAccount ? (
          ""
        ) : (
          <>
            <label for="name">Your name (optional)</label>
            <input id="name" name="name" type="text" />
          </>
        )}
        <label for="password">{view.hasAccount ? "Your password" : "Choose a password (at least 8 characters)"}</label>
        <input id="password" name="password" type="password" autocomplete={view.hasAccount ? "current-password" : "new-password"} required />
        <button type="submit">Accept invitation</button>
      </PostForm>
    </Layout>
  );
}

const when = (iso: string | null) => (iso ? iso.replace("T", " ").slice(0, 19) + " UTC" : "never");

export function KeysPage(props: {
  session: SessionUser;
  csrf: string;
  apiKeys: ApiKeyListItem[];
  oauthKeys: OAuthKey[];
  created?: { name: string; token: string } | null;
  error?: string | null;
}) {
  const canManage = props.session.organization?.role !== "member";
  return (
    <Layout title="Keys" session={props.session} csrf={props.csrf}>
      <ErrorMessage message={props.error} />
      {props.created ? (
        <div class="notice" role="status">
          <p>
            API key <strong safe>{props.created.name}</strong> created. Copy its token now; it is not shown again:
          </p>
          <p>
            <code id="new-token" safe>
              {props.created.token}
            </code>
          </p>
        </div>
      ) : (
        ""
      )}
      <h2>API keys</h2>
      <table>
        <thead>
          <tr>
            <th scope="col">Name</th>
            <th scope="col">Token</th>
            <th scope="col">Last used</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {props.apiKeys.map((key) => (
            <tr>
              <td safe>{key.name}</td>
              <td>
                <code safe>{key.token}</code>
              </td>
              <td safe>{key.deletedAt ? `revoked ${when(key.deletedAt)}` : when(key.lastUsedAt)}</td>
              <td>
                {canManage && !key.deletedAt ? (
                  <>
                    <PostForm csrf={props.csrf} action={`/settings/keys/${key.id}/rename`} class="inline">
                      <label for={`rename-${key.id}`}>New name</label>
                      <input id={`rename-${key.id}`} name="name" type="text" required value={key.name} />
                      <button type="submit" class="secondary">
                        Rename
                      </button>
                    </PostForm>
                    <PostForm csrf={props.csrf} action={`/settings/keys/${key.id}/revoke`} class="inline" confirm="Revoke this API key?">
                      <button type="submit">Revoke</button>
                    </PostForm>
                  </>
                ) : (
                  ""
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {canManage ? (
        <PostForm csrf={props.csrf} action="/settings/keys">
          <label for="key-name">New API key name</label>
          <input id="key-name" name="name" type="text" required />
          <button type="submit">Create API key</button>
        </PostForm>
      ) : (
        ""
      )}
      <h2>OAuth keys (connected agents)</h2>
      <table>
        <thead>
          <tr>
            <th scope="col">Client</th>
            <th scope="col">User</th>
            <th scope="col">Connected</th>
            <th scope="col">Last used</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {props.oauthKeys.map((key) => (
            <tr>
              <td safe>{key.clientName ?? key.clientId}</td>
              <td safe>{key.userEmail}</td>
              <td safe>{when(key.connectedAt)}</td>
              <td safe>{key.disabled ? "revoked" : when(key.lastActivityAt)}</td>
              <td>
                {!key.disabled && (canManage || key.userId === props.session.userId) ? (
                  <PostForm csrf={props.csrf} action={`/settings/oauth-keys/${key.id}/revoke`} class="inline" confirm="Disconnect this agent?">
                    <button type="submit">Revoke</button>
                  </PostForm>
                ) : (
                  ""
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </Layout>
  );
}

export function MembersPage(props: { session: SessionUser; csrf: string; members: (ActiveMember | InvitedMember)[]; error?: string | null; notice?: string | null }) {
  const canManage = props.session.organization?.role !== "member";
  const isOwner = props.session.organization?.role === "owner";
  const roles = isOwner ? ["member", "admin", "owner"] : ["member", "admin"];
  return (
    <Layout title="Members" session={props.session} csrf={props.csrf}>
      <ErrorMessage message={props.error} />
      {props.notice ? (
        <p class="notice" role="status" safe>
          {props.notice}
        </p>
      ) : (
        ""
      )}
      <table>
        <thead>
          <tr>
            <th scope="col">Email</th>
            <th scope="col">Name</th>
            <th scope="col">Role</th>
            <th scope="col">Status</th>
            <th scope="col">Actions</th>
          </tr>
        </thead>
        <tbody>
          {props.members.map((member) => (
            <tr>
              <td safe>{member.email}</td>
              <td safe>{member.name ?? ""}</td>
              <td safe>{member.role ?? "member"}</td>
              <td safe>{member.status}</td>
              <td>
                {canManage ? (
                  <>
                    {member.status === "active" ? (
                      <PostForm csrf={props.csrf} action={`/settings/members/${member.id}/role`} class="inline">
                        <label for={`role-${member.id}`}>Role</label>
                        <select id={`role-${member.id}`} name="role">
                          {roles.map((role) => (
                            <option value={role} selected={role === member.role}>
                              {role}
                            </option>
                          ))}
                        </select>
                        <button type="submit" class="secondary">
                          Change
                        </button>
                      </PostForm>
                    ) : (
                      ""
                    )}
                    <PostForm csrf={props.csrf} action={`/settings/members/${member.id}/remove`} class="inline" confirm="Remove?">
                      <button type="submit">{member.status === "active" ? "Remove" : "Cancel invitation"}</button>
                    </PostForm>
                  </>
                ) : (
                  ""
                )}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
      {canManage ? (
        <PostForm csrf={props.csrf} action="/settings/members">
          <label for="invite-email">Invite by email</label>
          <input id="invite-email" name="email" type="email" required />
          <label for="invite-role">Role</label>
          <select id="invite-role" name="role">
            {roles.map((role) => (
              <option value={role}>{role}</option>
            ))}
          </select>
          <button type="submit">Send invitation</button>
        </PostForm>
      ) : (
        ""
      )}
    </Layout>
  );
}
