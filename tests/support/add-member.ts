import type { ApiResponse, Client } from "./harness.ts";

/**
 * Adds `member` to a hub the way the API allows since adding by id needs the
 * adder to be able to find the person: an invite e-mailed to their address
 * first (which the add then marks used), then POST /members.
 */
export async function addMemberByEmailInvite(adder: Client, hubId: string, member: Pick<Client, "id" | "email">, role: string): Promise<ApiResponse> {
  const invite = await adder.post(`/v1/hubs/${hubId}/invites`, { role: "viewer", email: member.email });
  if (invite.status !== 201) return invite;
  return adder.post(`/v1/hubs/${hubId}/members`, { user_id: member.id, role });
}
