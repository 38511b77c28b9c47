import { Elysia, t } from "elysia";
import type { Context } from "../../context";
import { createMailer } from "../../lib/mailer";
import { authGuard } from "../auth";
import type { Principal } from "../auth/service";
import { ActiveMember, InvitedMember, InviteMemberBody, MemberList, MemberParams, UpdateMemberRoleBody } from "./model";
import { MembersService } from "./service";

/** The organization's members and invitations, as the SDK's `members` resource. */
export const membersModule = ({ sql, config, log, auth, onShutdown }: Context) => {
  const mailer = createMailer(config, log);
  onShutdown(() => mailer.drain());
  const members = new MembersService(sql, config, mailer, log);
  const actorOf = (principal: Principal) => members.actorOf(principal);
  return new Elysia({ name: "members", detail: { tags: ["members"] } })
    .use(authGuard(auth))
    .get("/v1/members", async ({ principal }) => ({ members: await members.list(principal.organizationId) }), {
      response: MemberList,
      detail: { operationId: "listMembers", summary: "List members", description: "Active members, then pending invitations." },
    })
    .post(
      "/v1/members",
      async ({ principal, body, status }) => status(201, await members.invite(await actorOf(principal), principal.organizationId, body)),
      {
        body: InviteMemberBody,
        response: { 201: InvitedMember },
        detail: {
          operationId: "inviteMember",
          summary: "Invite a member",
          description: "Mails an accept link (valid 7 days) to `email`; `role` defaults to `member`. Owners and admins (or an API key) only; only owners invite owners.",
        },
      },
    )
    .get("/v1/members/:memberId", ({ principal, params }) => members.get(principal.organizationId, params.memberId), {
      params: MemberParams,
      response: ActiveMember,
      detail: { operationId: "getMember", summary: "Get a member" },
    })
    .patch(
      "/v1/members/:memberId",
      async ({ principal, params, body }) => members.updateRole(await actorOf(principal), principal.organizationId, params.memberId, body.role),
      {
        params: MemberParams,
        body: UpdateMemberRoleBody,
        response: ActiveMember,
        detail: { operationId: "updateMemberRole", summary: "Change a member's role", description: "The last owner cannot be demoted (409)." },
      },
    )
    .delete(
      "/v1/members/:memberId",
      async ({ principal, params, status }) => {
        await members.remove(await actorOf(principal), principal.organizationId, params.memberId);
        return status(204, undefined);
      },
      {
        params: MemberParams,
        response: { 204: t.Void() },
        detail: {
          operationId: "removeMember",
          summary: "Remove a member or cancel an invitation",
          description: "The last owner cannot be removed (409). The member's OAuth grants in the organization are revoked.",
        },
      },
    );
};
