import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Account, Profile, User } from "next-auth";
import { sessionOptions } from "@/lib/auth/session-options.ts";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { clientFor, createHarness, type Harness } from "./support/harness.ts";

// Linked sign-in identities (Memax's auth.listIdentities / unlinkProvider). GitHub and Google cannot
// be reached offline, so the sign-in callback next-auth calls after the provider's redirect is
// called here with what a provider returns.

let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h?.close();
});

async function providerSignIn(provider: "github" | "google", providerAccountId: string, user: { email: string; name: string }, profile: Record<string, unknown> = {}) {
  const options = await sessionOptions(h.db);
  const account = { type: "oauth", provider, providerAccountId } as Account;
  return options.callbacks!.signIn!({ user: { id: providerAccountId, ...user } as User, account, profile: profile as Profile });
}

/** A client with an API key of the user a provider sign-in created (they have no key of their own yet). */
async function keyFor(email: string): Promise<ReturnType<typeof clientFor>> {
  const user = await h.db.user.findUniqueOrThrow({ where: { email } });
  return clientFor((await insertApiKey(h.db, user.id, "test", new Date())).key);
}

describe("GET /v1/auth/identities and DELETE /v1/auth/link/{provider}", () => {
  it("lists what the providers said at sign-in, refreshed at the next sign-in", async () => {
    expect(await providerSignIn("github", "gh-1", { email: "Octo@Example.test", name: "Octo Cat" })).toBe(true);
    const octo = await keyFor("octo@example.test");
    const first = await octo.get("/v1/auth/identities");
    expect(first.status).toBe(200);
    expect(first.body.data).toEqual([
      { id: expect.any(String), user_id: expect.any(String), provider: "github", provider_id: "gh-1", provider_email: "Octo@Example.test", provider_name: "Octo Cat", created_at: expect.any(String) },
    ]);
    expect(await providerSignIn("github", "gh-1", { email: "octo@example.test", name: "Octo the Cat" })).toBe(true);
    expect((await octo.get("/v1/auth/identities")).body.data[0]).toMatchObject({ provider_name: "Octo the Cat", provider_email: "octo@example.test" });
    // A Google account with a verified address of the same user links to it.
    expect(await providerSignIn("google", "g-1", { email: "octo@example.test", name: "Octo" }, { email_verified: true })).toBe(true);
    expect((await octo.get("/v1/auth/identities")).body.data.map((i: { provider: string }) => i.provider)).toEqual(["github", "google"]);
    expect((await octo.get("/v1/auth/me")).body.data.connected_providers.sort()).toEqual(["github", "google"]);
  });

  it("unlinks a provider, but never the last way to sign in", async () => {
    const octo = await keyFor("octo@example.test");
    expect((await octo.delete("/v1/auth/link/github")).body).toEqual({ data: { status: "unlinked" } });
    expect((await octo.get("/v1/auth/identities")).body.data.map((i: { provider: string }) => i.provider)).toEqual(["google"]);
    // No password and nothing else linked: Google stays.
    const last = await octo.delete("/v1/auth/link/google");
    expect(last).toMatchObject({ status: 409, body: { error: { code: "conflict" } } });
    expect(await h.db.oAuthAccount.count({ where: { provider: "google", providerAccountId: "g-1" } })).toBe(1);
    expect((await octo.delete("/v1/auth/link/github")).status).toBe(404);
    expect((await octo.delete("/v1/auth/link/gitlab")).status).toBe(400);
  });

  it("a user with a password may unlink their only provider; others see none of it", async () => {
    const ann = await h.user("Ann");
    await h.db.oAuthAccount.create({ data: { id: crypto.randomUUID(), userId: ann.id, provider: "github", providerAccountId: "gh-ann" } });
    await h.db.user.update({ where: { id: ann.id }, data: { passwordHash: "scrypt$placeholder" } });
    const bob = await h.user("Bob");
    expect((await bob.get("/v1/auth/identities")).body.data).toEqual([]);
    expect((await bob.delete("/v1/auth/link/github")).status).toBe(404);
    expect(await h.db.oAuthAccount.count({ where: { userId: ann.id } })).toBe(1);
    expect((await ann.delete("/v1/auth/link/github")).status).toBe(200);
    expect(await h.db.oAuthAccount.count({ where: { userId: ann.id } })).toBe(0);
  });
});
