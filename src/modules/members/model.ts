import { t, type Static } from "elysia";
import { Role } from "../account/model";

const nullable = <T extends Parameters<typeof t.Union>[0][number]>(schema: T) => t.Union([schema, t.Null()]);

export const ActiveMember = t.Object({
  status: t.Literal("active"),
  id: t.String({ description: "Membership id; addresses the row in update and remove" }),
  organizationId: t.String(),
  userId: t.String(),
  role: Role,
  name: nullable(t.String()),
  email: t.String(),
  image: nullable(t.String()),
  joinedAt: t.String({ format: "date-time" }),
});
export type ActiveMember = Static<typeof ActiveMember>;

export const InvitedMember = t.Object({
  status: t.Literal("invited"),
  id: t.String({ description: "Invitation id, distinct from membership ids" }),
  organizationId: t.String(),
  userId: t.Null(),
  role: nullable(Role),
  name: t.Null(),
  email: t.String(),
  image: t.Null(),
  invitedAt: t.String({ format: "date-time" }),
  expiresAt: t.String({ format: "date-time" }),
  inviterId: t.String({ description: "User id of the inviter, or `API` for an API key" }),
});
export type InvitedMember = Static<typeof InvitedMember>;

export const MemberList = t.Object({ members: t.Array(t.Union([ActiveMember, InvitedMember])) });

export const InviteMemberBody = t.Object({
  email: t.String({ format: "email", maxLength: 320, description: "The invitee receives an accept link by email" }),
  role: t.Optional(Role),
});

export const UpdateMemberRoleBody = t.Object({ role: t.UnionEnum(["admin", "member"], { description: "Owners are made on the web, not here" }) });

export const MemberParams = t.Object({ memberId: t.String() });
