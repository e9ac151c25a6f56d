import { expect } from "vitest";
import { encode } from "next-auth/jwt";
import { sessionSecret } from "@/lib/auth/session.ts";
import type { Db } from "@/lib/db/database.ts";

export interface Choices {
  decision?: "allow" | "deny";
  hubs?: "all" | string[];
  access?: "read" | "write";
}

/** The consent page's HTML attribute values, unescaped. */
export function decode(value: string): string {
  return value.replace(/&quot;/g, '"').replace(/&#39;/g, "'").replace(/&lt;/g, "<").replace(/&gt;/g, ">").replace(/&amp;/g, "&");
}

/** A dashboard session for `userId`, as the sign-in would set it. */
export async function sessionCookieFor(db: Db, userId: string): Promise<string> {
  return `next-auth.session-token=${await encode({ token: { sub: userId }, secret: await sessionSecret(db) })}`;
}

/**
 * The user's side of an authorization request on the server at `origin`: follow the URL, get
 * sent to sign in, come back signed in (`cookie`), submit the real consent form, and return
 * where the browser is sent (the client's redirect URI with a code or an error).
 */
export async function consentAt(origin: string, authorizationUrl: URL | string, cookie: string, choices: Choices = {}): Promise<URL> {
  const url = new URL(authorizationUrl, origin);
  const anonymous = await fetch(url, { redirect: "manual" });
  expect(anonymous.status).toBe(302);
  const signIn = new URL(anonymous.headers.get("location")!, origin);
  expect(signIn.pathname).toBe("/sign-in");
  // After signing in, the dashboard sends the user back to callbackUrl.
  const back = new URL(signIn.searchParams.get("callbackUrl")!, origin);
  const page = await fetch(back, { headers: { cookie }, redirect: "manual" });
  expect(page.status).toBe(200);
  expect(page.headers.get("content-type")).toContain("text/html");
  expect(page.headers.get("x-frame-options")).toBe("DENY");
  const html = await page.text();
  const form = new URLSearchParams();
  for (const [, name, value] of html.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)">/g)) form.append(name!, decode(value!));
  form.set("decision", choices.decision ?? "allow");
  if (!choices.hubs || choices.hubs === "all") form.set("hubs", "all");
  else {
    form.set("hubs", "selected");
    for (const id of choices.hubs) {
      expect(html).toContain(`name="hub_ids" value="${id}"`);
      form.append("hub_ids", id);
    }
  }
  form.set("access", choices.access ?? "write");
  const submitted = await fetch(`${origin}/oauth/authorize`, {
    method: "POST",
    headers: { cookie, "content-type": "application/x-www-form-urlencoded", origin },
    body: form,
    redirect: "manual",
  });
  expect(submitted.status, await submitted.clone().text()).toBe(303);
  return new URL(submitted.headers.get("location")!);
}
