import type { AuthOptions } from "next-auth";
import CredentialsProvider from "next-auth/providers/credentials";
import GitHubProvider from "next-auth/providers/github";
import GoogleProvider from "next-auth/providers/google";
import { rateLimiter } from "@/lib/api/rate-limit.ts";
import type { Db } from "@/lib/db/database.ts";
import { newId } from "@/lib/ids.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { verifyPassword } from "./password.ts";
import { SESSION_MAX_AGE_SECONDS, sessionSecret } from "./session.ts";
import { signUpOpen } from "./sign-up.ts";

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

/** next-auth configuration: JWT sessions in an encrypted cookie, users in our own tables. */
export async function sessionOptions(db: Db): Promise<AuthOptions> {
  configureAuthUrl();
  const providers: AuthOptions["providers"] = [
    CredentialsProvider({
      id: "credentials",
      name: "Email and password",
      credentials: { email: { label: "Email", type: "email" }, password: { label: "Password", type: "password" } },
      async authorize(credentials) {
        const email = credentials?.email?.trim().toLowerCase();
        const password = credentials?.password;
        if (!email || !password) return null;
        // Per-account guessing is capped (heavy bucket: 60 tries a minute by default).
        const limit = await rateLimiter().limit("heavy", `sign-in:${email}`);
        if (!limit.success) throw new Error("Too many sign-in attempts; wait a minute and try again");
        const user = await db.user.findUnique({ where: { email } });
        if (!(await verifyPassword(password, user?.passwordHash))) return null;
        return { id: user!.id, email: user!.email, name: user!.name };
      },
    }),
  ];
  if (process.env.GITHUB_CLIENT_ID && process.env.GITHUB_CLIENT_SECRET) {
    providers.push(GitHubProvider({ clientId: process.env.GITHUB_CLIENT_ID, clientSecret: process.env.GITHUB_CLIENT_SECRET }));
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
        const linked = await db.oAuthAccount.findUnique({
          where: { provider_providerAccountId: { provider: account.provider, providerAccountId: account.providerAccountId } },
        });
        if (linked) return true;
        const email = user.email?.trim().toLowerCase();
        if (!email) return "/sign-in?error=OAuthNoEmail";
        const existing = await db.user.findUnique({ where: { email } });
        const now = new Date();
        if (existing) {
          // Linking by email is only safe when the provider vouches for the address.
          const verified = account.provider === "google" && (profile as { email_verified?: boolean } | undefined)?.email_verified === true;
          if (!verified) return "/sign-in?error=OAuthAccountNotLinked";
          await db.oAuthAccount.create({
            data: { id: newId(now.getTime()), userId: existing.id, provider: account.provider, providerAccountId: account.providerAccountId },
          });
          return true;
        }
        if (!signUpOpen()) return "/sign-in?error=SignupClosed";
        await createUser(db, { email, name: user.name?.trim() || email.split("@")[0]! }, now, (tx, created) =>
          tx.oAuthAccount.create({
            data: { id: newId(now.getTime()), userId: created.user.id, provider: account.provider, providerAccountId: account.providerAccountId },
          }),
        );
        return true;
      },
      async jwt({ token, account }) {
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
