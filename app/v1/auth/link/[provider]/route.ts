import { ok } from "@/lib/api/envelope.ts";
import { methodsNotAllowed, withAuth, withPublic } from "@/lib/api/with-auth.ts";
import { startProviderLink } from "@/lib/auth/provider-link.ts";
import { unlinkProvider } from "@/lib/auth/unlink-provider.ts";

type Params = { provider: string };

// GET /v1/auth/link/{provider} — a browser signed in to the dashboard adds a GitHub or Google account to its ways in
export const GET = withPublic<Params>({ bucket: "light" }, async (ctx, req, { provider }) => startProviderLink(ctx, req, provider));

// DELETE /v1/auth/link/{provider} — stop a provider's accounts signing the caller in (never the last way in)
export const DELETE = withAuth<Params>({ account: true, credentials: true }, async (ctx, _req, { provider }) => ok(await unlinkProvider(ctx, provider)));

export const { POST, PUT, PATCH, OPTIONS } = methodsNotAllowed("GET", "DELETE");
