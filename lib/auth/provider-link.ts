import type { RequestContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { serverSecret, sign, verify } from "@/lib/api/server-secret.ts";
import type { Db } from "@/lib/db/database.ts";
import { publicOrigin } from "@/lib/oauth/public-origin.ts";
import { safeCallback } from "@/lib/web/safe-callback.ts";
import { oauthProviders } from "./session-options.ts";
import { MAX_RETURN_TO_CHARS, signInLocation } from "./sign-in-location.ts";
import { sessionTokenFrom, sessionUserId } from "./session.ts";

/** The link intent rides in this cookie from the start of the flow to the provider's callback. */
export const LINK_COOKIE = "engram-link";
const LINK_TTL_SECONDS = 600;

export interface LinkIntent {
  userId: string;
  provider: string;
}

/**
 * GET /v1/auth/link/{provider}?redirect_uri= (Memax's linkProviderURL), opened in a browser signed
 * in to the dashboard: the provider's account is added to that account's ways in. It sets a signed,
 * ten-minute intent cookie, then sends the browser through the provider's sign-in (the /link page
 * starts it, as next-auth wants a POST); the callback links instead of signing someone in, and
 * ends at redirect_uri (this site only). Without a session the browser signs in first.
 */
export async function startProviderLink(ctx: RequestContext, req: Request, provider: string): Promise<Response> {
  if (!oauthProviders().some((p) => p.id === provider)) throw new ApiError("not_found", `Signing in with ${provider} is not configured on this server`);
  const url = new URL(req.url);
  const next = sameSiteTarget(url.searchParams.get("redirect_uri"), publicOrigin(req));
  const userId = await sessionUserId(ctx.db, sessionTokenFrom(req.headers.get("cookie")));
  if (!userId) {
    const signIn = signInLocation(url.pathname + url.search);
    if (!signIn) throw new ApiError("invalid_request", `The link request is too long to carry through sign-in (over ${MAX_RETURN_TO_CHARS / 1024} KiB escaped): sign in first, or send a shorter redirect_uri`);
    return redirect(signIn);
  }
  const payload = Buffer.from(JSON.stringify({ u: userId, p: provider, e: Math.floor(Date.now() / 1000) + LINK_TTL_SECONDS })).toString("base64url");
  const value = `${payload}.${sign(await serverSecret(ctx.db), payload)}`;
  const secure = publicOrigin(req).startsWith("https:") ? "; Secure" : "";
  return redirect(`/link/${provider}?next=${encodeURIComponent(next)}`, `${LINK_COOKIE}=${value}; Path=/api/auth; Max-Age=${LINK_TTL_SECONDS}; HttpOnly; SameSite=Lax${secure}`);
}

/** A path on this site: a same-origin absolute URL is reduced to its path; anything else is refused. */
function sameSiteTarget(raw: string | null, origin: string): string {
  if (!raw) return "/hubs";
  let target = raw;
  if (/^https?:\/\//i.test(raw)) {
    const parsed = URL.canParse(raw) ? new URL(raw) : null;
    if (!parsed) throw new ApiError("invalid_request", "redirect_uri is not a URL", { issues: [{ path: "redirect_uri", message: "not a URL" }] });
    if (parsed.origin !== origin) throw new ApiError("invalid_request", "redirect_uri must be a page of this site", { issues: [{ path: "redirect_uri", message: "another site" }] });
    target = parsed.pathname + parsed.search + parsed.hash;
  }
  const safe = safeCallback(target);
  if (safe !== target) throw new ApiError("invalid_request", "redirect_uri must be a page of this site", { issues: [{ path: "redirect_uri", message: "not a path of this site" }] });
  return safe;
}

function redirect(location: string, cookie?: string): Response {
  return new Response(null, { status: 302, headers: { Location: location, ...(cookie && { "Set-Cookie": cookie }) } });
}

/**
 * The intent of a link flow for this provider's callback: a valid, unexpired intent cookie, for the
 * user the browser is still signed in as. An intent without that session (signed out since, or a
 * cookie planted or left behind on a shared browser) links nothing: otherwise whoever finished the
 * next sign-in there would have their account added to, and be signed in as, the intent's user.
 * Every intent cookie the browser sent is tried (a planted one may come first).
 */
export async function linkIntentFrom(db: Db, cookieHeader: string | null, provider: string): Promise<LinkIntent | undefined> {
  const values = (cookieHeader ?? "")
    .split(";")
    .map((part) => part.trim())
    .filter((part) => part.startsWith(`${LINK_COOKIE}=`))
    .map((part) => part.slice(LINK_COOKIE.length + 1));
  if (values.length === 0) return undefined;
  const signedIn = await sessionUserId(db, sessionTokenFrom(cookieHeader));
  if (!signedIn) return undefined;
  const secret = await serverSecret(db);
  for (const value of values) {
    const [payload, signature] = value.split(".");
    if (!payload || !signature || !verify(secret, payload, signature)) continue;
    try {
      const intent = JSON.parse(Buffer.from(payload, "base64url").toString("utf8")) as { u?: unknown; p?: unknown; e?: unknown };
      if (intent.u !== signedIn || intent.p !== provider || typeof intent.e !== "number" || intent.e < Date.now() / 1000) continue;
      return { userId: signedIn, provider };
    } catch {
      continue;
    }
  }
  return undefined;
}

/** Ends the intent once its callback ran (whatever the outcome). */
export const CLEAR_LINK_COOKIE = `${LINK_COOKIE}=; Path=/api/auth; Max-Age=0; HttpOnly; SameSite=Lax`;
