import { createElement } from "react";
import { renderToStaticMarkup } from "react-dom/server";
import NextAuth from "next-auth";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { SOCKET_ADDRESS_HEADER } from "@/lib/api/client-address.ts";
import { sessionOptions } from "@/lib/auth/session-options.ts";
import { MemoryThrottleStore, setSignInThrottleStore } from "@/lib/auth/sign-in-throttle.ts";
import { SignInForm } from "@/components/auth-forms.tsx";
import { call, createHarness, type Harness } from "./support/harness.ts";
import { startSmtp } from "./support/smtp-fake.ts";

// The dashboard's e-mail code sign-in (address → code → signed in), and /login, where Memax's SDK
// sends providerLoginURL("email").

let h: Harness;
let smtp: Awaited<ReturnType<typeof startSmtp>>;

beforeAll(async () => {
  h = await createHarness();
  smtp = await startSmtp();
  process.env.SMTP_URL = smtp.url;
});
afterAll(async () => {
  delete process.env.SMTP_URL;
  await smtp?.close();
  await h?.close();
});

const codeIn = (data: string) => /sign-in code is (\d{6})/.exec(data.replace(/=\r\n/g, ""))?.[1];

async function mailedCode(email: string): Promise<string> {
  const before = smtp.messages.length;
  const res = await h.anonymous.post("/v1/auth/email/request", { email });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  expect(smtp.messages.length).toBe(before + 1);
  return codeIn(smtp.messages.at(-1)!.data)!;
}

/**
 * One call of next-auth's endpoints with Engram's options, through its pages-router entry (the app
 * route reads headers through next/headers, which needs a live Next request), as tests/end-session.test.ts.
 */
async function nextAuth(method: "GET" | "POST", action: string[], cookies: Record<string, string>, body: Record<string, string> = {}, address = "192.0.2.1") {
  const headers: Record<string, string | string[]> = {};
  let answer: unknown;
  const res = {
    status: () => res,
    setHeader: (key: string, v: string | string[]) => ((headers[key.toLowerCase()] = v), res),
    getHeader: (key: string) => headers[key.toLowerCase()],
    send: (b: unknown) => void (answer = b),
    json: (b: unknown) => void (answer = b),
    end: () => {},
  };
  const req = { method, query: { nextauth: action }, cookies, headers: { host: "engram.test", "x-forwarded-proto": "http", [SOCKET_ADDRESS_HEADER]: address }, body };
  await NextAuth(req as never, res as never, await sessionOptions(h.db));
  const set: Record<string, string> = {};
  for (const cookie of ([] as string[]).concat(headers["set-cookie"] ?? [])) {
    const [name, value] = cookie.split(";")[0]!.split("=") as [string, string];
    if (value) set[name] = decodeURIComponent(value);
  }
  return { cookies: set, body: answer as { url?: string } | undefined };
}

const SESSION = "next-auth.session-token";

/** What the sign-in form does: next-auth's CSRF token, then the e-mail code provider's callback. */
async function signInWithCode(email: string, code: string, address?: string): Promise<{ url: string; cookie?: string }> {
  const csrf = await nextAuth("GET", ["csrf"], {});
  const { csrfToken } = csrf.body as unknown as { csrfToken: string };
  const res = await nextAuth("POST", ["callback", "email-code"], csrf.cookies, { email, code, csrfToken, callbackUrl: "/hubs", json: "true" }, address);
  return { url: res.body?.url ?? "", cookie: res.cookies[SESSION] && `${SESSION}=${res.cookies[SESSION]}` };
}

describe("GET /login", () => {
  it("leads to the dashboard's sign-in, keeping the provider hint and where to go after", async () => {
    const { GET } = await import("@/app/login/route.ts");
    const res = await GET(new Request("http://engram.test/login?provider=email&callbackUrl=%2Fhubs"));
    expect(res.status).toBe(307);
    const location = new URL(res.headers.get("location")!, "http://engram.test");
    expect(location.pathname).toBe("/sign-in");
    expect(location.searchParams.get("provider")).toBe("email");
    expect(location.searchParams.get("callbackUrl")).toBe("/hubs");
  });
});

describe("the e-mail code sign-in of the dashboard", () => {
  it("signs the address in with the mailed code: a session the API accepts, once", async () => {
    const ann = await h.user("Ann");
    const code = await mailedCode(ann.email);
    const wrong = await signInWithCode(ann.email, code === "000000" ? "111111" : "000000");
    expect(wrong.cookie).toBeUndefined();
    expect(new URL(wrong.url, "http://engram.test").searchParams.get("error")).toBe("CredentialsSignin");

    const signedIn = await signInWithCode(ann.email, code);
    expect(new URL(signedIn.url, "http://engram.test").pathname).toBe("/hubs");
    expect(signedIn.cookie).toBeDefined();
    const me = await call("GET", "/v1/auth/me", undefined, { headers: { cookie: signedIn.cookie! } });
    expect(me.status).toBe(200);
    expect(me.body.data.user.id).toBe(ann.id);
    expect(me.body.data.credential.type).toBe("session");
    // A dashboard sign-in, not a CLI one: no connected app appears.
    expect(await h.db.oAuthGrant.count({ where: { userId: ann.id } })).toBe(0);
    // The code works once.
    expect((await signInWithCode(ann.email, code)).cookie).toBeUndefined();
  });

  it("counts wrong codes against the client's address with the API's: locked out past its free failures, on the form and the API alike", async () => {
    process.env.ENGRAM_SIGNIN_IP_FAILURES = "3";
    setSignInThrottleStore(new MemoryThrottleStore());
    try {
      const victims = await Promise.all(["Vera", "Vito", "Vale"].map((name) => h.user(name)));
      const codes: string[] = [];
      for (const victim of victims) codes.push(await mailedCode(victim.email));
      const wrong = (i: number) => (codes[i] === "000000" ? "000001" : "000000");
      for (let i = 0; i < 3; i++) expect((await signInWithCode(victims[i]!.email, wrong(i), "203.0.113.9")).cookie).toBeUndefined();
      // Locked: even a right code from that client is not checked, here or through the API.
      const locked = await signInWithCode(victims[2]!.email, codes[2]!, "203.0.113.9");
      expect(locked.cookie).toBeUndefined();
      expect(new URL(locked.url, "http://engram.test").searchParams.get("error")).toBe("TooManyAttempts");
      const api = await h.anonymous.post("/v1/auth/email/verify", { email: victims[2]!.email, code: codes[2] }, { headers: { [SOCKET_ADDRESS_HEADER]: "203.0.113.9" } });
      expect(api.status).toBe(429);
      // The code it did not get to check still signs its owner in from elsewhere.
      expect((await signInWithCode(victims[2]!.email, codes[2]!, "198.51.100.7")).cookie).toBeDefined();
    } finally {
      delete process.env.ENGRAM_SIGNIN_IP_FAILURES;
      setSignInThrottleStore(new MemoryThrottleStore());
    }
  });

  it("is refused when e-mail sign-in is off (no SMTP), whatever the code", async () => {
    const bob = await h.user("Bob");
    const code = await mailedCode(bob.email);
    delete process.env.SMTP_URL;
    try {
      expect((await signInWithCode(bob.email, code)).cookie).toBeUndefined();
    } finally {
      process.env.SMTP_URL = smtp.url;
    }
  });
});

describe("the sign-in form", () => {
  const render = (props: Partial<Parameters<typeof SignInForm>[0]>) =>
    renderToStaticMarkup(createElement(SignInForm, { callbackUrl: "/hubs", providers: [], signUpOpen: true, ...props }));

  it("opens on the e-mail code form for ?provider=email when e-mail sign-in is on", () => {
    const html = render({ emailCode: true, initialProvider: "email" });
    expect(html).toContain("Send code");
    expect(html).not.toContain('type="password"');
  });

  it("offers the e-mail code beside the password when on, and not at all when off", () => {
    expect(render({ emailCode: true })).toContain('type="password"');
    expect(render({ emailCode: true })).toContain("Sign in with an e-mail code");
    expect(render({ emailCode: false, initialProvider: "email" })).not.toContain("e-mail code");
    expect(render({ emailCode: false, initialProvider: "email" })).toContain('type="password"');
  });
});
