import NextAuth from "next-auth";
import { NextRequest } from "next/server";
import { CLEAR_LINK_COOKIE, LINK_COOKIE, linkIntentFrom } from "@/lib/auth/provider-link.ts";
import { clearsSession, endSession } from "@/lib/auth/end-session.ts";
import { sessionOptions } from "@/lib/auth/session-options.ts";
import { clientAddress } from "@/lib/api/client-address.ts";
import { errorResponse } from "@/lib/api/envelope.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { readBody } from "@/lib/api/parse.ts";
import { checkSignIn, signInRefusal } from "@/lib/auth/sign-in-throttle.ts";
import { getDatabase } from "@/lib/db/database.ts";

type Context = { params: Promise<{ nextauth: string[] }> };

/**
 * next-auth's forms hold a CSRF token, an e-mail and password and a callback path. It reads a body
 * whole, with no bound (and the throttle's look at the e-mail read it once more), so an anonymous
 * client could make the server buffer any size; and it parses a JSON body unguarded (a 500).
 */
const MAX_AUTH_BODY_BYTES = 64 * 1024;

// GET|POST /api/auth/* — next-auth's sign-in, callback, csrf, session and sign-out endpoints (and the link step's callback)
async function handler(received: NextRequest, context: Context): Promise<Response> {
  const req = await boundedRequest(received);
  if (req instanceof Response) return req;
  const refused = await throttledPasswordSignIn(req, context);
  if (refused) return refused;
  const { prisma } = await getDatabase();
  // A provider's callback during GET /v1/auth/link/{provider}: link that account instead of signing in
  // by it — only for the browser still signed in as the user who asked (linkIntentFrom checks).
  const [action, provider] = (await context.params).nextauth ?? [];
  const cookies = req.headers.get("cookie");
  const link = action === "callback" && provider ? await linkIntentFrom(prisma, cookies, provider) : undefined;
  const res: Response = await NextAuth(req, context, await sessionOptions(prisma, { link }));
  // A sign-out next-auth accepted (its CSRF check passed, the cookie is cleared) ends the session itself.
  if (action === "signout" && req.method === "POST" && clearsSession(res)) await endSession(prisma, cookies);
  // Any callback or sign-out ends an intent the browser holds, used or not: it must not wait for
  // someone else's sign-in on this browser.
  if (!cookies?.includes(`${LINK_COOKIE}=`) || (action !== "callback" && action !== "signout")) return res;
  const out = new Response(res.body, res);
  out.headers.append("Set-Cookie", CLEAR_LINK_COOKIE);
  return out;
}

export { handler as GET, handler as POST };

/** The request with its body read against the cap (next-auth then reads the copy), or the answer refusing it. */
async function boundedRequest(req: NextRequest): Promise<NextRequest | Response> {
  if (req.method !== "POST" || !req.body) return req;
  let text: string;
  try {
    text = await readBody(req, MAX_AUTH_BODY_BYTES);
  } catch (error) {
    if (error instanceof ApiError) return errorResponse(error);
    throw error;
  }
  if (req.headers.get("content-type")?.includes("application/json")) {
    try {
      JSON.parse(text);
    } catch {
      return errorResponse(new ApiError("invalid_json", "Request body is not valid JSON"));
    }
  }
  return new NextRequest(req.url, { method: req.method, headers: req.headers, body: text });
}

/** A locked password sign-in is answered here with a real 429 (or 503 when the throttle's store is down). */
async function throttledPasswordSignIn(req: NextRequest, context: Context): Promise<Response | undefined> {
  const [action, provider] = (await context.params).nextauth ?? [];
  if (req.method !== "POST" || action !== "callback" || provider !== "credentials") return undefined;
  const form = await req.clone().formData().catch(() => undefined);
  const email = form?.get("email");
  if (typeof email !== "string" || !email.trim()) return undefined;
  const verdict = await checkSignIn(email, clientAddress(req));
  if (verdict.allowed) return undefined;
  const { status, code, message } = signInRefusal(verdict);
  return Response.json(
    { error: { code, message, details: { ...(verdict.reason === "locked" && { limit: verdict.limit }), retry_after: verdict.retryAfter } }, url: `/sign-in?error=${verdict.reason === "locked" ? "TooManyAttempts" : "SignInUnavailable"}` },
    { status, headers: { "Retry-After": String(verdict.retryAfter), "Cache-Control": "no-store" } },
  );
}
