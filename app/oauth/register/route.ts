import { knownClientAddress } from "@/lib/api/client-address.ts";
import { wellFormed } from "@/lib/api/parse.ts";
import { methodsNotAllowed } from "@/lib/api/with-auth.ts";
import { OAuthError, oauthJson } from "@/lib/oauth/oauth-error.ts";
import { corsPreflight, oauthRoute, readOAuthBody } from "@/lib/oauth/oauth-route.ts";
import { registerClient } from "@/lib/oauth/register-client.ts";

// POST /oauth/register — RFC 7591 dynamic client registration (public clients)
export const POST = oauthRoute(async (ctx, req) => {
  const text = await readOAuthBody(req, 16 * 1024, new OAuthError("invalid_client_metadata", "Client metadata is limited to 16 KiB"));
  let body: unknown;
  try {
    // Half a surrogate pair ("\ud800") reads as U+FFFD, as on every other JSON body: stored as it was, it failed in the database (500).
    body = wellFormed(JSON.parse(text));
  } catch {
    throw new OAuthError("invalid_client_metadata", "The body must be JSON client metadata");
  }
  return oauthJson(await registerClient(ctx.db, body, ctx.now(), knownClientAddress(req)), 201);
});

export const OPTIONS = corsPreflight;
export const { GET, PUT, PATCH, DELETE } = methodsNotAllowed("POST");
