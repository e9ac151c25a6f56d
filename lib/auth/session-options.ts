import type { AuthOptions } from "next-auth";
import CredentialsProvider from "next-auth/providers/credentials";
import GitHubProvider from "next-auth/providers/github";
import GoogleProvider from "next-auth/providers/google";
import { clientAddress } from "@/lib/api/client-address.ts";
import { rateLimiter } from "@/lib/api/rate-limit.ts";
import type { Db } from "@/lib/db/database.ts";
import { isUniqueViolation } from "@/lib/db/errors.ts";
import { newId } from "@/lib/ids.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { authorizeEmailCode } from "./authorize-email-code.ts";
import { githubUserinfo } from "./github-profile.ts";
import { verifyPassword } from "./password.ts";
import type { LinkIntent } from "./provider-link.ts";
import { SESSION_MAX_AGE_SECONDS, sessionPayloadAccount, sessionSecret } from "./session.ts";
import { claimAccount } from "./claim-account.ts";
import { releaseSignIn, reserveSignIn, settleSignIn } from "./sign-in-throttle.ts";
import { signUpOpen } from "./sign-up.ts";
import { providerUserName } from "@/lib/users/user-name.ts";

/**
 * next-auth needs the site's address for callbacks and redirects. ENGRAM_PUBLIC_URL stands
 * in for NEXTAUTH_URL; with neither set (a local install) the request's own host is used.
 */
export function configureAuthUrl(): void {
  if (!process.env.NEXTAUTH_URL && process.env.ENGRAM_PUBLIC_URL) process.env.NEXTAUTH_URL = process.env.ENGRAM_PUBLIC_URL;
  if (!process.env.NEXTAUTH_URL) process.env.AUTH_TRUST_HOST ??= "true";
}

/** The sign-in methods offered: password always, GitHub and Google when configured. */
export function oauthProviders(): { id: "github" | "google"; name: string }[] {
  const enabled: { id: "github" | "google"; name: string }[] = [];
  if (process.env.GITHUB_CLIENT_ID && process.env.GITHUB_CLIENT_SECRET) enabled.push({ id: "github", name: "GitHub" });
  if (process.env.GOOGLE_CLIENT_ID && process.env.GOOGLE_CLIENT_SECRET) enabled.push({ id: "google", name: "Google" });
  return enabled;
}

/**
 * The password check behind next-auth's credentials provider. Throttled per client address (a
 * request bucket, which fails open) and by failed attempts per account and per address with
 * backoff (lib/auth/sign-in-throttle.ts, which fails closed). Errors are next-auth error codes the
 * sign-in form turns into messages.
 */
export async function authorizePassword(
  db: Db,
  credentials: Record<string, string> | undefined,
  headers: Record<string, unknown> | Headers,
): Promise<{ id: string; email: string; name: string } | null> {
  const email = credentials?.email?.trim().toLowerCase();
  const password = credentials?.password;
  if (!email || !password) return null;
  const plain = headers instanceof Headers ? headers : new Headers(Object.entries(headers).filter((e): e is [string, string] => typeof e[1] === "string"));
  const address = clientAddress(new Request("http://engram.internal/", { headers: plain }));
  if (!(await rateLimiter().limit("heavy", `sign-in:ip:${address}`)).success) throw new Error("TooManyAttempts");
  const verdict = await reserveSignIn(email, address);
  if (!verdict.allowed) throw new Error(verdict.reason === "locked" ? "TooManyAttempts" : "SignInUnavailable");
  let user;
  let ok;
  try {
    user = await db.user.findUnique({ where: { email } });
    ok = await verifyPassword(password, user?.passwordHash);
  } catch (error) {
    // Counted when reserved: a check that never answered was no failed guess.
    await releaseSignIn(email, address);
    throw error;
  }
  await settleSignIn(email, address, ok && !!user);
  return ok && user ? { id: user.id, email: user.email, name: user.name } : null;
}

/**
 * Whether the provider vouches that the person signing in owns the address it gave: Google's
 * `email_verified`, and GitHub's as lib/auth/github-profile.ts adds it from GET /user/emails.
 */
export function providerVerifiedEmail(provider: string, profile: unknown): boolean {
  if (provider !== "google" && provider !== "github") return false;
  return (profile as { email_verified?: unknown } | undefined)?.email_verified === true;
}

/**
 * next-auth configuration: JWT sessions in an encrypted cookie, users in our own tables. With a
 * `link` (a provider's callback during GET /v1/auth/link/{provider}), that provider's account is
 * added to the linking user instead of signing someone in by it.
 */
export async function sessionOptions(db: Db, options: { link?: LinkIntent } = {}): Promise<AuthOptions> {
  configureAuthUrl();
  // When this request's sign-in checked who may sign in (a password, a provider's identity): a claim
  // committed after that check must end the session it issues too (lib/auth/session.ts). Options are
  // built per request, so this is the one sign-in's.
  let checkedAt: number | undefined;
  const providers: AuthOptions["providers"] = [
    CredentialsProvider({
      id: "credentials",
      name: "Email and password",
      credentials: { email: { label: "Email", type: "email" }, password: { label: "Password", type: "password" } },
      authorize: (credentials, req) => {
        checkedAt = Date.now();
        return authorizePassword(db, credentials, req?.headers ?? {});
      },
    }),
    // The sign-in form's e-mail code (POST /v1/auth/email/request mails it); refused while e-mail sign-in is off.
    CredentialsProvider({
      id: "email-code",
      name: "E-mail code",
      credentials: { email: { label: "Email", type: "email" }, code: { label: "Code", type: "text" } },
      authorize: (credentials, req) =>
        authorizeEmailCode(db, credentials, req?.headers ?? {}, (at) => {
          checkedAt = at;
        }),
    }),
  ];
  if (process.env.GITHUB_CLIENT_ID && process.env.GITHUB_CLIENT_SECRET) {
    providers.push(
      GitHubProvider({
        clientId: process.env.GITHUB_CLIENT_ID,
        clientSecret: process.env.GITHUB_CLIENT_SECRET,
        // Adds email_verified, which the sign-in callback needs to link by address.
        userinfo: { url: "https://api.github.com/user", request: githubUserinfo },
      }),
    );
  }
  if (process.env.GOOGLE_CLIENT_ID && process.env.GOOGLE_CLIENT_SECRET) {
    providers.push(GoogleProvider({ clientId: process.env.GOOGLE_CLIENT_ID, clientSecret: process.env.GOOGLE_CLIENT_SECRET }));
  }

  return {
    secret: await sessionSecret(db),
    session: { strategy: "jwt", maxAge: SESSION_MAX_AGE_SECONDS },
    pages: { signIn: "/sign-in", error: "/sign-in" },
    providers,
    callbacks: {
      async signIn({ user, account, profile }) {
        if (!account || account.type !== "oauth") return true;
        checkedAt = Date.now();
        const identity = { provider: account.provider, providerAccountId: account.providerAccountId };
        const shown = { providerEmail: (user.email ?? "").trim().slice(0, 320), providerName: (user.name ?? "").trim().slice(0, 200) };
        if (options.link?.provider === account.provider) return linkIdentity(db, options.link.userId, identity, shown);
        // A known identity only refreshes what the provider calls it now.
        if ((await db.oAuthAccount.updateMany({ where: identity, data: shown })).count > 0) return true;
        const email = user.email?.trim().toLowerCase();
        if (!email) return "/sign-in?error=OAuthNoEmail";
        const existing = await db.user.findUnique({ where: { email } });
        const now = new Date();
        if (existing) {
          // Linking by email is only safe when the provider vouches for the address.
          if (!providerVerifiedEmail(account.provider, profile)) return "/sign-in?error=OAuthAccountNotLinked";
          // The address is proven now: an account made by a password sign-up nobody proved is claimed.
          await claimAccount(db, existing.id, now);
          // The prover's own session starts after the cut-off the claim just set (strictly: a sign-in
          // from the claim's own millisecond is cut off).
          checkedAt = Math.max(Date.now(), now.getTime() + 1);
          await db.oAuthAccount.create({
            data: { id: newId(now.getTime()), userId: existing.id, provider: account.provider, providerAccountId: account.providerAccountId, ...shown },
          });
          return true;
        }
        if (!signUpOpen()) return "/sign-in?error=SignupClosed";
        // An address the provider does not vouch for is as unproven as a password sign-up's: the
        // first proof of it (an e-mail code, a verified provider) claims the account from its maker.
        const emailUnverified = !providerVerifiedEmail(account.provider, profile);
        await createUser(db, { email, name: providerUserName(user.name, email.split("@")[0]!), emailUnverified }, now, (tx, created) =>
          tx.oAuthAccount.create({
            data: { id: newId(now.getTime()), userId: created.user.id, provider: account.provider, providerAccountId: account.providerAccountId, ...shown },
          }),
        );
        return true;
      },
      async jwt({ token, user, account }) {
        // Without a user this is next-auth re-issuing a cookie it was sent (GET /api/auth/session),
        // with a new id and issue time: a session signed out of or cut off by a claim would come
        // back as a valid one. The throw makes next-auth clear the cookie instead.
        if (!user) {
          if (!(await sessionPayloadAccount(db, token))) throw new Error("This session has ended; sign in again");
          return token;
        }
        // next-auth gives every cookie it issues, a re-issue too, a new jti; this id stays the same
        // for all the cookies of one sign-in, so signing out ends them all (lib/auth/end-session.ts).
        token.sid = newId();
        token.signed_in_at = checkedAt ?? Date.now();
        // OAuth sign-ins arrive with the provider's user id; the session carries ours.
        if (account && account.type === "oauth") {
          const linked = await db.oAuthAccount.findUnique({
            where: { provider_providerAccountId: { provider: account.provider, providerAccountId: account.providerAccountId } },
            include: { user: true },
          });
          if (linked) {
            token.sub = linked.userId;
            token.name = linked.user.name;
            token.email = linked.user.email;
          }
        }
        return token;
      },
    },
  };
}

/**
 * The link step: the provider's account joins the linking user's ways in, whatever e-mail it has
 * (the person proved both: their session, and the provider's sign-in). An account that already
 * signs in someone else is refused, never moved; one already theirs is just refreshed.
 */
async function linkIdentity(
  db: Db,
  userId: string,
  identity: { provider: string; providerAccountId: string },
  shown: { providerEmail: string; providerName: string },
): Promise<string | true> {
  const existing = await db.oAuthAccount.findUnique({ where: { provider_providerAccountId: identity } });
  const refused = (code: string) => `/link/${identity.provider}?error=${code}`;
  if (existing && existing.userId !== userId) return refused("ProviderAccountInUse");
  if (existing) {
    await db.oAuthAccount.update({ where: { id: existing.id }, data: shown });
    return true;
  }
  if (!(await db.user.findUnique({ where: { id: userId }, select: { id: true } }))) return refused("LinkExpired");
  try {
    await db.oAuthAccount.create({ data: { id: newId(), userId, ...identity, ...shown } });
  } catch (error) {
    // The same account linked by someone at the same moment: the unique index decides.
    if (!isUniqueViolation(error)) throw error;
    const winner = await db.oAuthAccount.findUnique({ where: { provider_providerAccountId: identity } });
    if (winner?.userId !== userId) return refused("ProviderAccountInUse");
  }
  return true;
}
