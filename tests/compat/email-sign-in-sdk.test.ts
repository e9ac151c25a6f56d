import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startSmtp } from "../support/smtp-fake.ts";
import { loadSdk, startEngram, type Engram, type EngramUser } from "./support/engram.ts";

// Memax's SDK sign-in by e-mail code against the built server, the code mailed to a fake SMTP
// server: requestEmailOtp, verifyEmailOtp (tokens, or an exchange code for a loopback
// redirect_uri), exchangeCode and refresh, each answer checked against the SDK's types.

let engram: Engram;
let ann: EngramUser;
let bob: EngramUser;
let smtp: Awaited<ReturnType<typeof startSmtp>>;
let Memax: Awaited<ReturnType<typeof loadSdk>>["Memax"];
let MemaxError: Awaited<ReturnType<typeof loadSdk>>["MemaxError"];

beforeAll(async () => {
  ({ Memax, MemaxError } = await loadSdk());
  smtp = await startSmtp();
  engram = await startEngram({ SMTP_URL: smtp.url });
  ann = await engram.user("Ann");
  bob = await engram.user("Bob");
});
afterAll(async () => {
  await engram?.stop();
  await smtp?.close();
});

const codeIn = (data: string) => /sign-in code is (\d{6})/.exec(data.replace(/=\r\n/g, ""))?.[1];

async function mailedCode(anon: any, user: EngramUser, options: Record<string, unknown>): Promise<string> {
  const before = smtp.messages.length;
  const sent = await anon.auth.requestEmailOtp({ email: user.email.toUpperCase(), ...options });
  expect(sent).toMatchObject({ status: "sent", expires_in: expect.any(Number), email: user.email });
  expect(sent.dev_code).toBeUndefined();
  expect(smtp.messages.length).toBe(before + 1);
  const code = codeIn(smtp.messages.at(-1)!.data);
  expect(code).toBeDefined();
  return code!;
}

describe("e-mail sign-in through the SDK", () => {
  it("verifyEmailOtp answers an AuthTokenPair that works, and refresh turns it into a new one", async () => {
    const anon = new Memax({ apiUrl: engram.url, maxRetries: 0 });
    const code = await mailedCode(anon, ann, {});
    const pair = await anon.auth.verifyEmailOtp({ email: ann.email, code });
    expect(pair).toMatchObject({ access_token: expect.any(String), refresh_token: expect.any(String), expires_in: expect.any(Number) });
    const signedIn = new Memax({ apiUrl: engram.url, apiKey: pair.access_token, maxRetries: 0 });
    expect(JSON.stringify(await signedIn.auth.me())).toContain(ann.id);
    const refreshed = await anon.auth.refresh(pair.refresh_token);
    expect(refreshed).toMatchObject({ access_token: expect.any(String), refresh_token: expect.any(String), expires_in: expect.any(Number) });
    expect(refreshed.refresh_token).not.toBe(pair.refresh_token);
    const again = new Memax({ apiUrl: engram.url, apiKey: refreshed.access_token, maxRetries: 0 });
    expect(JSON.stringify(await again.auth.me())).toContain(ann.id);
    // A code is good once.
    const reused = await anon.auth.verifyEmailOtp({ email: ann.email, code }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(reused).toBeInstanceOf(MemaxError);
  });

  it("with a loopback redirect_uri, verify answers an exchange code that exchangeCode turns into tokens", async () => {
    const anon = new Memax({ apiUrl: engram.url, maxRetries: 0 });
    const code = await mailedCode(anon, bob, { redirect_uri: "http://127.0.0.1:53682/callback" });
    const verified = await anon.auth.verifyEmailOtp({ email: bob.email, code });
    expect(verified).toMatchObject({ status: "ok", code: expect.any(String), redirect: expect.stringMatching(/^http:\/\/127\.0\.0\.1:53682\/callback\?/), user_id: bob.id });
    const pair = await anon.auth.exchangeCode(verified.code);
    expect(pair).toMatchObject({ access_token: expect.any(String), refresh_token: expect.any(String), expires_in: expect.any(Number) });
    const signedIn = new Memax({ apiUrl: engram.url, apiKey: pair.access_token, maxRetries: 0 });
    expect(JSON.stringify(await signedIn.auth.me())).toContain(bob.id);
  });
});
