import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { decideChatApprovalBodySchema } from "@/lib/chat/chat-fields.ts";
import { decideChatApproval } from "@/lib/chat/decide-chat-approval.ts";

type Params = { id: string; approvalId: string };

// POST /v1/chat/sessions/{id}/approvals/{approval_id} — approve or deny a tool call the agent is waiting on
export const POST = withAuth<Params>({}, async (ctx, req, { id, approvalId }) => {
  const { decision } = await parseJson(req, decideChatApprovalBodySchema);
  return ok(await decideChatApproval(ctx, id, approvalId, decision));
});

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
