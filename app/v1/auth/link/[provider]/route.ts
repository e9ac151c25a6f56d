import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth } from "@/lib/api/with-auth.ts";
import { unlinkProvider } from "@/lib/auth/unlink-provider.ts";

// DELETE /v1/auth/link/{provider} — stop a provider's accounts signing the caller in (never the last way in)
export const DELETE = withAuth<{ provider: string }>({ account: true, credentials: true }, async (ctx, _req, { provider }) => ok(await unlinkProvider(ctx, provider)));

export const { GET, POST, PUT, PATCH } = methodsNotAllowed("DELETE");
