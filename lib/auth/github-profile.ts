/** One entry of GitHub's GET /user/emails (the `user:email` scope next-auth asks for). */
export interface GitHubEmail {
  email: string;
  primary?: boolean;
  verified?: boolean;
}

/** GitHub's GET /user, with `email_verified` added: whether GitHub says the address was proven. */
export interface GitHubProfileWithVerification extends Record<string, unknown> {
  email?: string;
  email_verified: boolean;
}

const EMAILS_TIMEOUT_MS = 10_000;

/**
 * next-auth's GitHub userinfo step, plus what it leaves out: whether GitHub verified the e-mail it
 * hands on. GET /user names no such thing, and next-auth's default falls back to the primary address
 * of GET /user/emails without looking at its `verified` flag — an address anyone can add to a GitHub
 * account unproven. The sign-in callback links a GitHub account to an existing Engram account by
 * address only when this says verified.
 */
export async function githubUserinfo({
  client,
  tokens,
}: {
  client: { userinfo(accessToken: string): Promise<Record<string, unknown>> };
  tokens: { access_token?: string };
}): Promise<GitHubProfileWithVerification> {
  const accessToken = tokens.access_token ?? "";
  const profile = await client.userinfo(accessToken);
  return withVerifiedEmail(profile, await githubEmails(accessToken));
}

/** The account's addresses, or none when GitHub does not answer (nothing is then treated as verified). */
async function githubEmails(accessToken: string): Promise<GitHubEmail[]> {
  try {
    const res = await fetch("https://api.github.com/user/emails", {
      headers: { authorization: `token ${accessToken}`, accept: "application/vnd.github+json", "user-agent": "engram" },
      signal: AbortSignal.timeout(EMAILS_TIMEOUT_MS),
    });
    if (!res.ok) return [];
    const body: unknown = await res.json();
    return Array.isArray(body) ? body.filter((e): e is GitHubEmail => typeof e?.email === "string") : [];
  } catch {
    return [];
  }
}

/**
 * The profile's address and whether GitHub verified it: the public address GET /user gave, verified
 * only if GET /user/emails lists it as verified; without a public one, the primary verified address
 * (else the primary, else the first, unverified), as next-auth would pick.
 */
export function withVerifiedEmail(profile: Record<string, unknown>, emails: GitHubEmail[]): GitHubProfileWithVerification {
  const given = typeof profile.email === "string" && profile.email.trim() ? profile.email : null;
  const same = (a: string, b: string) => a.trim().toLowerCase() === b.trim().toLowerCase();
  if (given) return { ...profile, email: given, email_verified: emails.some((e) => same(e.email, given) && e.verified === true) };
  const chosen = emails.find((e) => e.primary && e.verified === true) ?? emails.find((e) => e.primary) ?? emails[0];
  return { ...profile, email: chosen?.email, email_verified: chosen?.verified === true };
}
