import { clientAddress } from "@/lib/api/client-address.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { rateLimiter } from "@/lib/api/rate-limit.ts";
import type { Db } from "@/lib/db/database.ts";
import { verifyEmailCodeBodySchema } from "./email-code-fields.ts";
import { emailSignInOn } from "./request-email-code.ts";
import { emailCodeAccount, giveCodeBack, spendEmailCode } from "./verify-email-code.ts";

/**
 * The dashboard's e-mail code sign-in behind next-auth's "email-code" credentials provider: the code
 * POST /v1/auth/email/request mailed, checked and spent as POST /v1/auth/email/verify does (the
 * same tries, the same single use), but signing in the browser instead of minting the CLI's grant.
 * `signedIn(at)` is told when the address was proven, so the session starts after the claim
 * that proof may make. Errors are next-auth error codes the sign-in form turns into messages.
 */
export async function authorizeEmailCode(
  db: Db,
  credentials: Record<string, string> | undefined,
  headers: Record<string, unknown> | Headers,
  signedIn: (at: number) => void,
): Promise<{ id: string; email: string; name: string } | null> {
  if (!emailSignInOn()) return null;
  const input = verifyEmailCodeBodySchema.safeParse({ email: credentials?.email ?? "", code: credentials?.code ?? "" });
  if (!input.success) return null;
  const plain = headers instanceof Headers ? headers : new Headers(Object.entries(headers).filter((e): e is [string, string] => typeof e[1] === "string"));
  const address = clientAddress(new Request("http://engram.internal/", { headers: plain }));
  // The API's verify is in the heavy bucket per address; the form is no way around it.
  if (!(await rateLimiter().limit("heavy", `ip:${address}`)).success) throw new Error("TooManyAttempts");
  const now = new Date();
  let row;
  try {
    row = await spendEmailCode(db, input.data, now, address);
  } catch (error) {
    // The client's lock (wrong codes and passwords from its address) or its store down: the form's messages for both.
    if (error instanceof ApiError && error.code === "rate_limited") throw new Error("TooManyAttempts");
    if (error instanceof ApiError && error.code === "unavailable") throw new Error("SignInUnavailable");
    throw error;
  }
  if (!row) return null;
  try {
    const user = await emailCodeAccount(db, input.data.email, now);
    // Strictly after the claim's cut-off (lib/auth/session.ts), as a provider's proof of the address.
    signedIn(Math.max(Date.now(), now.getTime() + 1));
    return user;
  } catch (error) {
    await giveCodeBack(db, row, now).catch((restoreError: unknown) => console.error("[auth] giving back an e-mail code after a failed sign-in failed", restoreError));
    // A wrong code's answer, not a 500: emailCodeAccount refuses an address whose account just went.
    if (error instanceof ApiError && error.code === "unauthorized") return null;
    throw error;
  }
}
