import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { cancelTransfer } from "@/lib/hubs/cancel-transfer.ts";

// POST /v1/hubs/{id}/ownership-transfer/{transfer_id}/cancel — the owner withdraws or the target declines
export const POST = withAuth<{ id: string; transfer_id: string }>({}, async (ctx, _req, { id, transfer_id }) =>
  ok(await cancelTransfer(ctx, id, transfer_id)),
);

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
