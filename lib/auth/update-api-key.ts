import { z } from "zod";
import { atLeastOneOf } from "@/lib/api/at-least-one-of.ts";
import type { AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { lockForTransaction } from "@/lib/db/advisory-lock.ts";
import { isUuid } from "@/lib/ids.ts";
import { apiKeysLockKey } from "./create-api-key.ts";

export const updateApiKeyBodySchema = atLeastOneOf(
  z.object({
    // "" clears the assignment (Memax's contract), so it is a value here, not "absent".
    agent_name: z.string().trim().max(100).meta({ keepEmpty: true }).optional(),
    standalone: z.boolean().optional(),
  }),
  ["agent_name", "standalone"],
  { message: "provide agent_name or standalone", path: ["agent_name"] },
);

/**
 * Re-attributes one of the caller's active keys: its agent (what its pushes are credited to) or the
 * standalone flag. Under the api-keys lock a disconnect (lib/agents/disconnect-agent.ts) also takes,
 * so a move lands wholly before a disconnect (a key moved onto the agent is revoked with it) or after
 * it (a key the disconnect revoked is not found), never in between.
 */
export async function updateApiKey(ctx: AuthContext, id: string, input: z.output<typeof updateApiKeyBodySchema>) {
  if (!isUuid(id)) throw new ApiError("not_found", "API key not found");
  const row = await ctx.db.$transaction(async (tx) => {
    await lockForTransaction(tx, apiKeysLockKey(ctx.user.id));
    const found = await tx.apiKey.findFirst({ where: { id, userId: ctx.user.id, revokedAt: null }, select: { id: true, agentName: true } });
    if (!found) throw new ApiError("not_found", "API key not found");
    // A key issued for an agent cannot move any key off or onto an agent, its own or the keys it made:
    // disconnecting the agent revokes its keys, and a key it re-attributed would escape that (or be
    // swept into it).
    const agentKey = ctx.credential.type === "api_key" ? ctx.credential.agentName : undefined;
    if (input.agent_name !== undefined && agentKey && (input.agent_name || null) !== found.agentName) {
      throw new ApiError("forbidden", `This key was issued for the agent "${agentKey}"; it cannot change which agent a key belongs to`);
    }
    return tx.apiKey.update({
      where: { id: found.id },
      data: {
        ...(input.agent_name !== undefined && { agentName: input.agent_name || null }),
        ...(input.standalone !== undefined && { standalone: input.standalone }),
      },
    });
  });
  return { id: row.id, agent_name: row.agentName ?? "", standalone: row.standalone };
}
