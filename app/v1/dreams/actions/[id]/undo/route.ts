import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { undoDreamAction } from "@/lib/dreams/undo-dream-action.ts";

// POST /v1/dreams/actions/:id/undo — restore an archived memory, split a merge, unsort a memory, reopen a review
export const POST = withAuth<{ id: string }>({}, async (ctx, _req, params) => ok(await undoDreamAction(ctx, params.id)));

export const { GET, PUT, PATCH, DELETE, OPTIONS } = methodsNotAllowed("POST");
