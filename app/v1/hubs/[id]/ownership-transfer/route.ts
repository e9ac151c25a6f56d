import { ok } from "@/lib/api/envelope.ts";
import { parseJson } from "@/lib/api/parse.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { createTransfer } from "@/lib/hubs/create-transfer.ts";
import { createTransferBodySchema } from "@/lib/hubs/hub-fields.ts";

// POST /v1/hubs/{id}/ownership-transfer — offer the hub to another member (owner only, 7 days)
export const POST = withAuth<{ id: string }>({}, async (ctx, req, { id }) =>
  ok(await createTransfer(ctx, id, await parseJson(req, createTransferBodySchema)), 201),
);

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
