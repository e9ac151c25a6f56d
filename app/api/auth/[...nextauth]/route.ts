import NextAuth from "next-auth";
import type { NextRequest } from "next/server";
import { CLEAR_LINK_COOKIE, LINK_COOKIE, linkIntentFrom } from "@/lib/auth/provider-link.ts";
import { clearsSession, endSession } from "@/lib/auth/end-session.ts";
import { sessionOptions } from "@/lib/auth/session-options.ts";
import { clientAddress } from "@/lib/api/client-address.ts";
import { checkSignIn, signInRefusal } from "@/lib/auth/sign-in-throttle.ts";
import { getDatabase } from "@/lib/db/database.ts";

type Context = { params: Promise<{ nextauth: string[] }> };

// GET|POST /api/auth/* — next-auth's sign-in, callback, csrf, session and sign-out endpoints (and the link step's callback)
async function handler(req: NextRequest, context: Context): Promise<Response> {
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
    { error: { code, message, details: { retry_after: verdict.retryAfter } }, url: `/sign-in?error=${verdict.reason === "locked" ? "TooManyAttempts" : "SignInUnavailable"}` },
    { status, headers: { "Retry-After": String(verdict.retryAfter), "Cache-Control": "no-store" } },
  );
}
