import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { acceptTransfer } from "@/lib/hubs/accept-transfer.ts";

// POST /v1/hubs/{id}/ownership-transfer/{transfer_id}/accept — the target takes over the hub
export const POST = withAuth<{ id: string; transfer_id: string }>({}, async (ctx, _req, { id, transfer_id }) =>
  ok(await acceptTransfer(ctx, id, transfer_id)),
);

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
