import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { deleteAccountData } from "@/lib/users/delete-account-data.ts";

// DELETE /v1/account/data — empty the account (personal hub, configs, sessions, notifications), keep the account and team hubs
export const DELETE = withAuth({ account: true, credentials: true }, async (ctx) => {
  const result = await deleteAccountData(ctx);
  return ok(result, result.deleted ? 200 : 202);
});

export const { GET, POST, PUT, PATCH, OPTIONS } = methodsNotAllowed("DELETE");
