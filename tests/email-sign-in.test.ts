import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { createHarness, type Harness } from "./support/harness.ts";
import { loadMemaxSdk, routeFetch } from "./support/memax-sdk.ts";
import { startSmtp } from "./support/smtp-fake.ts";
import { POST as signUpRoute } from "@/app/api/auth/sign-up/route.ts";
import { insertApiKey } from "@/lib/auth/create-api-key.ts";
import { sessionCookieFor } from "./support/oauth-consent.ts";
import { sessionOptions } from "@/lib/auth/session-options.ts";
import type { Account, Profile, User } from "next-auth";
import { providerUserName } from "@/lib/users/user-name.ts";
import { pruneEmailSignInCodes } from "@/lib/auth/prune-email-sign-in-codes.ts";
import { deliverMail, enqueueMail, mailSurelyUndelivered } from "@/lib/mail/send-mail.ts";
import nodemailer from "nodemailer";
import { SOCKET_ADDRESS_HEADER } from "@/lib/api/client-address.ts";
import { MemoryThrottleStore, setSignInThrottleStore } from "@/lib/auth/sign-in-throttle.ts";
import { Readable } from "node:stream";

// E-mail sign-in codes (Memax's auth.requestEmailOtp / verifyEmailOtp): mailed through SMTP, stored
// as an HMAC, single use, a few tries; a right code signs in as `memax login` does.

let h: Harness;
let smtp: Awaited<ReturnType<typeof startSmtp>>;

/** The sign-in callback next-auth calls after GitHub's redirect (GitHub cannot be reached offline). */
async function githubSignIn(githubId: string, email: string, profile: Record<string, unknown> = {}, link?: { userId: string; provider: string }) {
  const options = await sessionOptions(h.db, { link });
  const account = { type: "oauth", provider: "github", providerAccountId: githubId } as Account;
  return options.callbacks!.signIn!({ user: { id: githubId, email, name: "GitHub user" } as User, account, profile: profile as Profile });
}

const codeIn = (data: string) => /sign-in code is (\d{6})/.exec(data.replace(/=\r\n/g, ""))?.[1];

async function requestCode(email: string, extra: Record<string, unknown> = {}) {
  const before = smtp.messages.length;
  const res = await h.anonymous.post("/v1/auth/email/request", { email, ...extra });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return { res, code: smtp.messages.length > before ? codeIn(smtp.messages.at(-1)!.data) : undefined };
}

// A real trigger on the test database fails every insert into `table` while `work` runs, nothing mocked.
async function withInsertsFailing<T>(table: string, work: () => Promise<T>): Promise<T> {
  return withWritesFailing("INSERT", table, work);
}

// The same for `operation` (INSERT, UPDATE): the database refusing that write while `work` runs.
async function withWritesFailing<T>(operation: "INSERT" | "UPDATE", table: string, work: () => Promise<T>): Promise<T> {
  await h.db.$executeRawUnsafe(`CREATE FUNCTION refuse_insert_for_test() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$`);
  await h.db.$executeRawUnsafe(`CREATE TRIGGER refuse_insert_for_test BEFORE ${operation} ON ${table} FOR EACH ROW EXECUTE FUNCTION refuse_insert_for_test()`);
  try {
    return await work();
  } finally {
    await h.db.$executeRawUnsafe(`DROP TRIGGER refuse_insert_for_test ON ${table}`);
    await h.db.$executeRawUnsafe(`DROP FUNCTION refuse_insert_for_test()`);
  }
}

beforeAll(async () => {
  h = await createHarness();
  smtp = await startSmtp();
  process.env.SMTP_URL = smtp.url;
  setSignInThrottleStore(new MemoryThrottleStore());
});
afterEach(() => {
  delete process.env.ENGRAM_EMAIL_CODE_DEV_RETURN;
  delete process.env.ENGRAM_ALLOW_SIGNUP;
  // Every test's wrong codes come from one client address: each test starts with none counted.
  setSignInThrottleStore(new MemoryThrottleStore());
});
afterAll(async () => {
  setSignInThrottleStore(undefined);
  delete process.env.SMTP_URL;
  await smtp?.close();
  await h?.close();
});

describe("POST /v1/auth/email/request and /verify", () => {
  it("mails a code that signs the account in once; the outbox never holds it", async () => {
    const ann = await h.user("Ann");
    const { res, code } = await requestCode(`  ${ann.email.toUpperCase()} `);
    expect(res.body.data).toEqual({ status: "sent", expires_in: 600, email: ann.email, cooldown: 60 });
    expect(code).toMatch(/^\d{6}$/);
    const outbox = await h.db.mailOutbox.findFirstOrThrow({ where: { toAddress: ann.email, kind: "sign_in_code" } });
    expect(outbox.body).not.toContain(code);
    expect(outbox.subject).not.toContain(code);

    const wrong = code === "000000" ? "111111" : "000000";
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: ann.email, code: wrong })).status).toBe(401);
    const signedIn = await h.anonymous.post("/v1/auth/email/verify", { email: ann.email, code });
    expect(signedIn.status).toBe(200);
    expect(signedIn.body.data).toMatchObject({ access_token: expect.any(String), refresh_token: expect.stringMatching(/^ert_/), token_type: "Bearer", scope: "read write" });
    const me = await h.anonymous.get("/v1/auth/me", { headers: { authorization: `Bearer ${signedIn.body.data.access_token}` } });
    expect(me.body.data.user.email).toBe(ann.email);
    // Once only.
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: ann.email, code })).status).toBe(401);
  });

  it("waits a minute between codes, and the newest code is the only one that works", async () => {
    const bob = await h.user("Bob");
    const first = await requestCode(bob.email);
    const again = await h.anonymous.post("/v1/auth/email/request", { email: bob.email });
    // limit: the codes an address may be sent an hour.
    expect(again).toMatchObject({ status: 429, body: { error: { code: "rate_limited", details: { limit: 5, retry_after: expect.any(Number) } } } });
    // A minute later (the first code's row aged by hand).
    await h.db.emailSignInCode.updateMany({ where: { email: bob.email }, data: { createdAt: new Date(Date.now() - 61_000) } });
    const second = await requestCode(bob.email);
    expect(second.code).not.toBe(first.code);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: bob.email, code: first.code })).status).toBe(401);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: bob.email, code: second.code })).status).toBe(200);
    // Five in an hour at most.
    await h.db.emailSignInCode.updateMany({ where: { email: bob.email }, data: { createdAt: new Date(Date.now() - 120_000) } });
    for (let i = 0; i < 3; i++) await h.db.emailSignInCode.create({ data: { id: crypto.randomUUID(), email: bob.email, codeHash: "x", expiresAt: new Date(), createdAt: new Date(Date.now() - 120_000) } });
    expect((await h.anonymous.post("/v1/auth/email/request", { email: bob.email })).status).toBe(429);
  });

  it("a code the mail server refused is no code: the request can be made again at once, and the code before it still works", async () => {
    const ivy = await h.user("Ivy");
    const { code: first } = await requestCode(ivy.email);
    // A minute on, the cooldown is over: she asks for another, and the mail server refuses it.
    await h.db.emailSignInCode.updateMany({ where: { email: ivy.email }, data: { createdAt: new Date(Date.now() - 61_000) } });
    const refusing = await startSmtp({ rejectRcpt: true });
    process.env.SMTP_URL = refusing.url;
    try {
      const refused = await h.anonymous.post("/v1/auth/email/request", { email: ivy.email });
      expect(refused.status, JSON.stringify(refused.body)).toBe(503);
    } finally {
      process.env.SMTP_URL = smtp.url;
      await refusing.close();
    }
    // The code she had before the refused one was not ended by it.
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: ivy.email, code: first })).status).toBe(200);
    // "Try again later" held: no cooldown or hourly try was spent on a code that never left.
    const again = await requestCode(ivy.email);
    expect(again.code).toMatch(/^\d{6}$/);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: ivy.email, code: again.code })).status).toBe(200);
  });

  it("while a new code's mail is still being sent, the code before it keeps working; once it was handed over, only the new one does", async () => {
    const lea = await h.user("Lea");
    const leo = await h.user("Leo");
    const first = [(await requestCode(lea.email)).code!, (await requestCode(leo.email)).code!];
    await h.db.emailSignInCode.updateMany({ where: { email: { in: [lea.email, leo.email] } }, data: { createdAt: new Date(Date.now() - 61_000) } });
    let answer!: () => void;
    const slow = await startSmtp({ answerDataWhen: new Promise<void>((resolve) => (answer = resolve)) });
    process.env.SMTP_URL = slow.url;
    try {
      const pending = [lea, leo].map((user) => h.anonymous.post("/v1/auth/email/request", { email: user.email }));
      for (let waited = 0; slow.messages.length < 2; waited += 20) {
        if (waited > 10_000) throw new Error("the slow relay never got both messages");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // The relay has the new mails and has not answered yet: Lea's earlier code still signs her in.
      const early = await h.anonymous.post("/v1/auth/email/verify", { email: lea.email, code: first[0] });
      expect(early.status, JSON.stringify(early.body)).toBe(200);
      answer();
      for (const res of await Promise.all(pending)) expect(res.status, JSON.stringify(res.body)).toBe(200);
      // Handed over: Leo's earlier code is ended, the new one in the mail works.
      const newCode = codeIn(slow.messages.find((m) => m.to.join().includes(leo.email))!.data)!;
      expect((await h.anonymous.post("/v1/auth/email/verify", { email: leo.email, code: first[1] })).status).toBe(401);
      expect((await h.anonymous.post("/v1/auth/email/verify", { email: leo.email, code: newCode })).status).toBe(200);
    } finally {
      process.env.SMTP_URL = smtp.url;
      await slow.close();
    }
  });

  it("a code whose send outlasted the cooldown does not end the newer code sent meanwhile", async () => {
    const pat = await h.user("Pat");
    await requestCode(pat.email);
    await h.db.emailSignInCode.updateMany({ where: { email: pat.email }, data: { createdAt: new Date(Date.now() - 122_000) } });
    let answer!: () => void;
    const slow = await startSmtp({ answerDataWhen: new Promise<void>((resolve) => (answer = resolve)) });
    process.env.SMTP_URL = slow.url;
    try {
      const pending = h.anonymous.post("/v1/auth/email/request", { email: pat.email });
      for (let waited = 0; slow.messages.length < 1; waited += 20) {
        if (waited > 10_000) throw new Error("the slow relay never got the message");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // Its send has taken more than the minute's cooldown (aged by hand): Pat asks again, and that mail goes at once.
      const slowId = (await h.db.emailSignInCode.findFirstOrThrow({ where: { email: pat.email }, orderBy: { createdAt: "desc" } })).id;
      await h.db.emailSignInCode.update({ where: { id: slowId }, data: { createdAt: new Date(Date.now() - 61_000) } });
      process.env.SMTP_URL = smtp.url;
      const newest = await requestCode(pat.email);
      answer();
      expect((await pending).status).toBe(200);
      // The older mail's code does not take over from the newest one, which Pat types.
      const older = codeIn(slow.messages[0]!.data)!;
      if (older !== newest.code) expect((await h.anonymous.post("/v1/auth/email/verify", { email: pat.email, code: older })).status).toBe(401);
      expect((await h.anonymous.post("/v1/auth/email/verify", { email: pat.email, code: newest.code })).status).toBe(200);
    } finally {
      process.env.SMTP_URL = smtp.url;
      await slow.close();
    }
  });

  it("a code whose send outlasted a newer code that was then used or burned never becomes a working code", async () => {
    for (const [name, spend] of [
      ["Ren", async (email: string, code: string) => expect((await h.anonymous.post("/v1/auth/email/verify", { email, code })).status).toBe(200)],
      ["Rex", async (email: string, code: string, older: string) => {
        const wrong = ["111111", "222222", "333333"].find((c) => c !== code && c !== older)!;
        for (let i = 0; i < 5; i++) expect((await h.anonymous.post("/v1/auth/email/verify", { email, code: wrong })).status).toBe(401);
      }],
    ] as const) {
      const user = await h.user(name);
      let answer!: () => void;
      const slow = await startSmtp({ answerDataWhen: new Promise<void>((resolve) => (answer = resolve)) });
      process.env.SMTP_URL = slow.url;
      try {
        const pending = h.anonymous.post("/v1/auth/email/request", { email: user.email });
        for (let waited = 0; slow.messages.length < 1; waited += 20) {
          if (waited > 10_000) throw new Error("the slow relay never got the message");
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
        // Its send has taken more than the cooldown (aged by hand): a newer code goes out at once and is spent.
        await h.db.emailSignInCode.updateMany({ where: { email: user.email }, data: { createdAt: new Date(Date.now() - 61_000) } });
        process.env.SMTP_URL = smtp.url;
        const newest = await requestCode(user.email);
        const older = codeIn(slow.messages[0]!.data)!;
        await spend(user.email, newest.code!, older);
        answer();
        expect((await pending).status).toBe(200);
        // The slow mail's code must not come alive after the newer one was used or burned (five more guesses).
        if (older !== newest.code) expect((await h.anonymous.post("/v1/auth/email/verify", { email: user.email, code: older })).status).toBe(401);
        expect(await h.db.emailSignInCode.count({ where: { email: user.email, consumedAt: null } })).toBe(0);
      } finally {
        process.env.SMTP_URL = smtp.url;
        await slow.close();
      }
    }
  });

  it("a code whose slow mail was handed over while a newer code's send was still in flight works until that newer mail is handed over", async () => {
    // The newer send refused (its code never left): the older, delivered code is the one that works.
    // The newer send accepted: it replaces the older code, which never comes back.
    for (const [name, newerRefused] of [["Quin", true], ["Quill", false]] as const) {
      const user = await h.user(name);
      let answerOlder!: () => void;
      let answerNewer!: () => void;
      const older = await startSmtp({ answerDataWhen: new Promise<void>((resolve) => (answerOlder = resolve)) });
      const newer = await startSmtp({ answerDataWhen: new Promise<void>((resolve) => (answerNewer = resolve)), refuseData: newerRefused });
      const waitFor = async (relay: typeof older) => {
        for (let waited = 0; relay.messages.length < 1; waited += 20) {
          if (waited > 10_000) throw new Error("the slow relay never got the message");
          await new Promise((resolve) => setTimeout(resolve, 20));
        }
      };
      try {
        process.env.SMTP_URL = older.url;
        const olderRequest = h.anonymous.post("/v1/auth/email/request", { email: user.email });
        await waitFor(older);
        // Its send has outlasted the cooldown (aged by hand): a newer code is asked for, its relay slow too.
        await h.db.emailSignInCode.updateMany({ where: { email: user.email }, data: { createdAt: new Date(Date.now() - 61_000) } });
        process.env.SMTP_URL = newer.url;
        const newerRequest = h.anonymous.post("/v1/auth/email/request", { email: user.email });
        await waitFor(newer);
        // The older mail is handed over while the newer one is still being sent.
        answerOlder();
        expect((await olderRequest).status).toBe(200);
        answerNewer();
        expect((await newerRequest).status).toBe(newerRefused ? 503 : 200);
        const olderCode = codeIn(older.messages[0]!.data)!;
        const newerCode = codeIn(newer.messages[0]!.data)!;
        if (newerRefused) {
          // The only mail that arrived holds the older code: it signs in.
          const res = await h.anonymous.post("/v1/auth/email/verify", { email: user.email, code: olderCode });
          expect(res.status, JSON.stringify(res.body)).toBe(200);
        } else {
          if (olderCode !== newerCode) expect((await h.anonymous.post("/v1/auth/email/verify", { email: user.email, code: olderCode })).status).toBe(401);
          expect((await h.anonymous.post("/v1/auth/email/verify", { email: user.email, code: newerCode })).status).toBe(200);
        }
      } finally {
        process.env.SMTP_URL = smtp.url;
        await older.close();
        await newer.close();
      }
    }
  });

  it("a code the mail server may have taken (the connection dropped after the message) stays, and so do its limits", async () => {
    const jo = await h.user("Jo");
    // Four codes earlier this hour: the unsure one is the hour's fifth, so the next can come only
    // when the first of them is an hour old, and the 503 says so (not the minute's cooldown).
    for (let i = 0; i < 4; i++) await h.db.emailSignInCode.create({ data: { id: crypto.randomUUID(), email: jo.email, codeHash: "x", expiresAt: new Date(), createdAt: new Date(Date.now() - 30 * 60_000 + i * 1000) } });
    const dropping = await startSmtp({ dropAfterData: true });
    process.env.SMTP_URL = dropping.url;
    try {
      const unsure = await h.anonymous.post("/v1/auth/email/request", { email: jo.email });
      expect(unsure.status, JSON.stringify(unsure.body)).toBe(503);
      expect(Number(unsure.headers.get("retry-after"))).toBeGreaterThan(25 * 60);
      expect(dropping.messages).toHaveLength(1);
      // It arrived after all: the code in it signs in.
      const code = codeIn(dropping.messages[0]!.data)!;
      // Asking again at once is held by the cooldown, as for a code that was sent: otherwise a relay
      // that queues and then times out lets anyone mail an address without end.
      const again = await h.anonymous.post("/v1/auth/email/request", { email: jo.email });
      expect(again.status).toBe(429);
      expect((await h.anonymous.post("/v1/auth/email/verify", { email: jo.email, code })).status).toBe(200);
    } finally {
      process.env.SMTP_URL = smtp.url;
      await dropping.close();
    }
  });

  it("a TLS record error after the message (smtps) is unsure, not undelivered: the code stays, and the person is not invited to a second mail", async () => {
    // nodemailer names every socket error CONN, whatever the phase: OpenSSL's "wrong version number"
    // after the message was handed over read as a handshake that never happened.
    const lee = await h.user("Lee");
    const garbling = await startSmtp({ tls: true, corruptAfterData: true });
    process.env.SMTP_URL = `${garbling.url}?tls.rejectUnauthorized=false`;
    try {
      const unsure = await h.anonymous.post("/v1/auth/email/request", { email: lee.email });
      expect(unsure.status, JSON.stringify(unsure.body)).toBe(503);
      expect(unsure.body.error.message).toMatch(/may still arrive/);
      expect(garbling.messages).toHaveLength(1);
      const code = codeIn(garbling.messages[0]!.data)!;
      expect((await h.anonymous.post("/v1/auth/email/request", { email: lee.email })).status).toBe(429);
      expect((await h.anonymous.post("/v1/auth/email/verify", { email: lee.email, code })).status).toBe(200);
    } finally {
      process.env.SMTP_URL = smtp.url;
      await garbling.close();
    }
  });

  it("a code sent to a relay that never answered (no greeting) surely never left: it counts for no limit", async () => {
    const kim = await h.user("Kim");
    const silent = await startSmtp({ silent: true });
    process.env.SMTP_URL = silent.url;
    try {
      const started = Date.now();
      const unreached = await h.anonymous.post("/v1/auth/email/request", { email: kim.email });
      expect(unreached.status, JSON.stringify(unreached.body)).toBe(503);
      // The relay's 10 s greeting timeout, not nodemailer's own 30 s (its options were taken as message defaults).
      expect(Date.now() - started).toBeLessThan(20_000);
    } finally {
      process.env.SMTP_URL = smtp.url;
      await silent.close();
    }
    // Asked again at once: no cooldown was spent on a code that was never handed over.
    const again = await requestCode(kim.email);
    expect(again.res.status).toBe(200);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: kim.email, code: again.code })).status).toBe(200);
  }, 60_000);

  it("a request failing before its mail was handed over (the outbox refusing the row) spends no cooldown, and the code before it still works", async () => {
    const max = await h.user("Max");
    const { code: first } = await requestCode(max.email);
    await h.db.emailSignInCode.updateMany({ where: { email: max.email }, data: { createdAt: new Date(Date.now() - 61_000) } });
    const failed = await withInsertsFailing("mail_outbox", () => h.anonymous.post("/v1/auth/email/request", { email: max.email }));
    expect(failed.status).toBeGreaterThanOrEqual(500);
    // No mail left, so the code Max already has is still the one that works.
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: max.email, code: first })).status).toBe(200);
    // And the retry the 500 invites goes at once: the failed request spent no cooldown.
    const again = await requestCode(max.email);
    expect(again.code).toMatch(/^\d{6}$/);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: max.email, code: again.code })).status).toBe(200);
  });

  it("a mail the relay took is a sent code even when its outbox row cannot then be marked sent (the database refusing it)", async () => {
    const ned = await h.user("Ned");
    const before = smtp.messages.length;
    const res = await withWritesFailing("UPDATE", "mail_outbox", () => h.anonymous.post("/v1/auth/email/request", { email: ned.email }));
    // The relay answered 250: the mail is in the inbox, so its code must work (a 500 here left it ended for good).
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(smtp.messages.length).toBe(before + 1);
    const code = codeIn(smtp.messages.at(-1)!.data);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: ned.email, code })).status).toBe(200);
  });

  it("a mailed code whose activation the database refuses once is retried: the request succeeds and the code works", async () => {
    const una = await h.user("Una");
    await h.db.$executeRawUnsafe(`CREATE SEQUENCE refuse_once_for_test`);
    // nextval is not rolled back with the refused update, so only the first update is refused.
    await h.db.$executeRawUnsafe(
      `CREATE FUNCTION refuse_once_for_test() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN IF nextval('refuse_once_for_test') = 1 THEN RAISE EXCEPTION 'refused once by the test'; END IF; RETURN NEW; END $$`,
    );
    await h.db.$executeRawUnsafe(`CREATE TRIGGER refuse_once_for_test BEFORE UPDATE ON email_sign_in_codes FOR EACH ROW EXECUTE FUNCTION refuse_once_for_test()`);
    const before = smtp.messages.length;
    let res;
    try {
      res = await h.anonymous.post("/v1/auth/email/request", { email: una.email });
    } finally {
      await h.db.$executeRawUnsafe(`DROP TRIGGER refuse_once_for_test ON email_sign_in_codes`);
      await h.db.$executeRawUnsafe(`DROP FUNCTION refuse_once_for_test()`);
      await h.db.$executeRawUnsafe(`DROP SEQUENCE refuse_once_for_test`);
    }
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(smtp.messages.length).toBe(before + 1);
    const code = codeIn(smtp.messages.at(-1)!.data);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: una.email, code })).status).toBe(200);
  });

  it("a mailed code the database will not make the working one gives its limits back: 503, and asking again goes at once", async () => {
    const vic = await h.user("Vic");
    const refused = await withWritesFailing("UPDATE", "email_sign_in_codes", () => h.anonymous.post("/v1/auth/email/request", { email: vic.email }));
    expect(refused).toMatchObject({ status: 503, body: { error: { code: "unavailable" } } });
    expect(JSON.stringify(refused.body)).not.toContain("refused by the test");
    const again = await requestCode(vic.email);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: vic.email, code: again.code })).status).toBe(200);
  });

  it("a refused mail whose failure cannot be written to the outbox is still answered 503, and spends no cooldown", async () => {
    const ora = await h.user("Ora");
    const refusing = await startSmtp({ rejectRcpt: true });
    process.env.SMTP_URL = refusing.url;
    try {
      const refused = await withWritesFailing("UPDATE", "mail_outbox", () => h.anonymous.post("/v1/auth/email/request", { email: ora.email }));
      expect(refused.status, JSON.stringify(refused.body)).toBe(503);
    } finally {
      process.env.SMTP_URL = smtp.url;
      await refusing.close();
    }
    const again = await requestCode(ora.email);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: ora.email, code: again.code })).status).toBe(200);
  });

  it("burns a code after five wrong tries", async () => {
    const cyd = await h.user("Cyd");
    const { code } = await requestCode(cyd.email);
    const wrong = code === "123456" ? "654321" : "123456";
    for (let i = 0; i < 5; i++) expect((await h.anonymous.post("/v1/auth/email/verify", { email: cyd.email, code: wrong })).status).toBe(401);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: cyd.email, code })).status).toBe(401);
  });

  it("one client is mailed at most ENGRAM_EMAIL_CODES_PER_CLIENT_HOUR codes an hour across addresses; another client is not held by it", async () => {
    // Each address gets five codes an hour, but one client asking for ever new addresses was held
    // only by the per-minute request bucket: a mail cannon of 60 mails a minute per address it had.
    process.env.ENGRAM_EMAIL_CODES_PER_CLIENT_HOUR = "3";
    try {
      const from = (address: string) => ({ headers: { [SOCKET_ADDRESS_HEADER]: address } });
      const sent = smtp.messages.length;
      for (let i = 0; i < 3; i++) expect((await h.anonymous.post("/v1/auth/email/request", { email: `sprayed-${i}@example.test` }, from("203.0.113.60"))).status).toBe(200);
      const refused = await h.anonymous.post("/v1/auth/email/request", { email: "sprayed-3@example.test" }, from("203.0.113.60"));
      expect(refused).toMatchObject({ status: 429, body: { error: { code: "rate_limited", details: { limit: 3, retry_after: expect.any(Number) } } } });
      expect(refused.body.error.message).toMatch(/from this client/);
      expect(Number(refused.headers.get("retry-after"))).toBeGreaterThan(3500);
      expect(smtp.messages.length).toBe(sent + 3);
      expect((await h.anonymous.post("/v1/auth/email/request", { email: "sprayed-3@example.test" }, from("198.51.100.60"))).status).toBe(200);
    } finally {
      delete process.env.ENGRAM_EMAIL_CODES_PER_CLIENT_HOUR;
    }
  });

  it("callers whose address the server cannot tell do not share one client's budget: the per-client cap is skipped for them, not spent by all", async () => {
    // Without scripts/server.mjs or TRUST_PROXY every caller's address is unknown: counted as one
    // client, one anonymous caller's requests stopped e-mail sign-in for everyone for an hour.
    process.env.ENGRAM_EMAIL_CODES_PER_CLIENT_HOUR = "2";
    try {
      const sent = smtp.messages.length;
      for (let i = 0; i < 4; i++) expect((await h.anonymous.post("/v1/auth/email/request", { email: `unknown-client-${i}@example.test` })).status).toBe(200);
      expect(smtp.messages.length).toBe(sent + 4);
      const rows = await h.db.emailSignInCode.findMany({ where: { email: { startsWith: "unknown-client-" } }, select: { clientAddress: true } });
      expect(rows.map((row) => row.clientAddress)).toEqual([null, null, null, null]);
    } finally {
      delete process.env.ENGRAM_EMAIL_CODES_PER_CLIENT_HOUR;
    }
  });

  it("wrong codes count against the client's address, across addresses: past its free failures it is locked out, others are not", async () => {
    // Five tries per code, five codes an hour per address: without a bound per client, one client
    // spraying guesses over many addresses whose codes it asked for got thousands of guesses an hour.
    process.env.ENGRAM_SIGNIN_IP_FAILURES = "3";
    setSignInThrottleStore(new MemoryThrottleStore());
    try {
      const from = (address: string) => ({ headers: { [SOCKET_ADDRESS_HEADER]: address } });
      const victims = await Promise.all(["Vera", "Vito", "Vale", "Vane"].map((name) => h.user(name)));
      const codes: string[] = [];
      for (const victim of victims) codes.push((await requestCode(victim.email)).code!);
      const wrong = (i: number) => (codes[i] === "000000" ? "000001" : "000000");
      for (let i = 0; i < 3; i++) expect((await h.anonymous.post("/v1/auth/email/verify", { email: victims[i]!.email, code: wrong(i) }, from("203.0.113.9"))).status).toBe(401);
      // Locked: the next guess from that client is not even checked.
      const locked = await h.anonymous.post("/v1/auth/email/verify", { email: victims[3]!.email, code: codes[3] }, from("203.0.113.9"));
      expect(locked).toMatchObject({ status: 429, body: { error: { code: "rate_limited", details: { limit: 3, retry_after: expect.any(Number) } } } });
      expect(Number(locked.headers.get("retry-after"))).toBeGreaterThan(0);
      // The code it did not get to check still works for its owner, from elsewhere.
      expect((await h.anonymous.post("/v1/auth/email/verify", { email: victims[3]!.email, code: codes[3] }, from("198.51.100.7"))).status).toBe(200);
    } finally {
      delete process.env.ENGRAM_SIGNIN_IP_FAILURES;
    }
  });

  it("a try with no live code (expired, spent, never asked for) is no guess: it does not count against the client's address", async () => {
    process.env.ENGRAM_SIGNIN_IP_FAILURES = "2";
    setSignInThrottleStore(new MemoryThrottleStore());
    try {
      const from = { headers: { [SOCKET_ADDRESS_HEADER]: "203.0.113.77" } };
      const [late, spent, other] = await Promise.all(["Lena", "Sven", "Otto"].map((name) => h.user(name)));
      const lateCode = (await requestCode(late!.email)).code!;
      await h.db.emailSignInCode.updateMany({ where: { email: late!.email }, data: { expiresAt: new Date(Date.now() - 1_000) } });
      expect((await h.anonymous.post("/v1/auth/email/verify", { email: late!.email, code: lateCode }, from)).status).toBe(401);
      // A double submit: the second finds the code spent by the first.
      const spentCode = (await requestCode(spent!.email)).code!;
      expect((await h.anonymous.post("/v1/auth/email/verify", { email: spent!.email, code: spentCode }, from)).status).toBe(200);
      expect((await h.anonymous.post("/v1/auth/email/verify", { email: spent!.email, code: spentCode }, from)).status).toBe(401);
      expect((await h.anonymous.post("/v1/auth/email/verify", { email: "never-asked@example.test", code: "123456" }, from)).status).toBe(401);
      // Two wrong tries would have locked it: the right code from there still signs in.
      const code = (await requestCode(other!.email)).code!;
      expect((await h.anonymous.post("/v1/auth/email/verify", { email: other!.email, code }, from)).status).toBe(200);
    } finally {
      delete process.env.ENGRAM_SIGNIN_IP_FAILURES;
    }
  });

  it("signs a new address up when sign-up is open, and mails no code when it is closed", async () => {
    const { code } = await requestCode("newcomer@example.test");
    const res = await h.anonymous.post("/v1/auth/email/verify", { email: "newcomer@example.test", code });
    expect(res.status).toBe(200);
    const user = await h.db.user.findUniqueOrThrow({ where: { email: "newcomer@example.test" } });
    expect(user.name).toBe("newcomer");
    expect(await h.db.hub.count({ where: { ownerId: user.id, hubType: "personal" } })).toBe(1);

    process.env.ENGRAM_ALLOW_SIGNUP = "false";
    const closed = await requestCode("stranger@example.test");
    expect(closed.res.body.data).toEqual({ status: "sent", expires_in: 600, email: "stranger@example.test", cooldown: 60 });
    expect(closed.code).toBeUndefined();
    expect(await h.db.user.count({ where: { email: "stranger@example.test" } })).toBe(0);
  });

  it("on a server closed to sign-ups, the answer does not tell an account from none; only the mailbox learns", async () => {
    process.env.ENGRAM_ALLOW_SIGNUP = "false";
    const ida = await h.user("Ida");
    const nobody = `nobody-${Date.now()}@example.test`;
    const request = (email: string) => h.anonymous.post("/v1/auth/email/request", { email });
    const sameShape = (res: { status: number; body: any }, email: string) => ({ status: res.status, body: JSON.parse(JSON.stringify(res.body).replaceAll(email, "<email>")) });

    // Both addresses get a mail: the account's holds a code, the other says there is no account (and no code).
    const before = smtp.messages.length;
    const [known, unknown] = [await request(ida.email), await request(nobody)];
    expect(sameShape(unknown, nobody)).toEqual(sameShape(known, ida.email));
    const mails = smtp.messages.slice(before);
    expect(mails.map((m) => m.to.join())).toEqual([expect.stringContaining(ida.email), expect.stringContaining(nobody)]);
    expect(codeIn(mails[0]!.data)).toMatch(/^\d{6}$/);
    expect(codeIn(mails[1]!.data)).toBeUndefined();
    expect(mails[1]!.data.replace(/=\r\n/g, "").replace(/\s+/g, " ")).toContain("no Engram account for this address");

    // A mail server that refuses the message fails both alike.
    const refusing = await startSmtp({ rejectRcpt: true });
    process.env.SMTP_URL = refusing.url;
    try {
      await h.db.emailSignInCode.updateMany({ where: { email: { in: [ida.email, nobody] } }, data: { createdAt: new Date(Date.now() - 61_000) } });
      const [knownDown, unknownDown] = [await request(ida.email), await request(nobody)];
      expect(knownDown.status).toBe(503);
      expect(sameShape(unknownDown, nobody)).toEqual(sameShape(knownDown, ida.email));
    } finally {
      process.env.SMTP_URL = smtp.url;
      await refusing.close();
    }

    // A development server returns a code either way.
    process.env.ENGRAM_EMAIL_CODE_DEV_RETURN = "1";
    await h.db.emailSignInCode.updateMany({ where: { email: { in: [ida.email, nobody] } }, data: { createdAt: new Date(Date.now() - 3_700_000) } });
    const [devKnown, devUnknown] = [await request(ida.email), await request(nobody)];
    expect(devKnown.body.data.dev_code).toMatch(/^\d{6}$/);
    expect(Object.keys(devUnknown.body.data).sort()).toEqual(Object.keys(devKnown.body.data).sort());
    // Nor does verifying the returned code: an address with no account is answered as a wrong code is.
    const verify = (email: string, code: string) => h.anonymous.post("/v1/auth/email/verify", { email, code });
    const wrong = await verify(ida.email, devKnown.body.data.dev_code === "000000" ? "000001" : "000000");
    const noAccount = await verify(nobody, devUnknown.body.data.dev_code);
    expect(sameShape(noAccount, nobody)).toEqual(sameShape(wrong, ida.email));
    expect(await h.db.user.count({ where: { email: nobody } })).toBe(0);
  });

  it("with a redirect_uri, verify answers an exchange code for the CLI's loopback address", async () => {
    const dan = await h.user("Dan");
    expect((await h.anonymous.post("/v1/auth/email/request", { email: dan.email, redirect_uri: "https://evil.example/cb" })).status).toBe(400);
    const { code } = await requestCode(dan.email, { redirect_uri: "http://127.0.0.1:53682/callback" });
    const res = await h.anonymous.post("/v1/auth/email/verify", { email: dan.email, code });
    expect(res.body.data).toMatchObject({ status: "ok", code: expect.stringMatching(/^eac_/), user_id: dan.id });
    expect(new URL(res.body.data.redirect).searchParams.get("code")).toBe(res.body.data.code);
    expect(res.body.data.redirect.startsWith("http://127.0.0.1:53682/callback?")).toBe(true);
    const tokens = await h.anonymous.post("/v1/auth/exchange", { code: res.body.data.code });
    expect(tokens.body.data).toMatchObject({ access_token: expect.any(String), refresh_token: expect.any(String) });
  });

  it("an attempt failing after the code was checked (the database refusing a write) leaves the code for the retry", async () => {
    // The last step, the token pair's refresh token: nothing of the attempt stays, and the same code then signs in.
    const fay = await h.user("Fay");
    const { code } = await requestCode(fay.email);
    const failed = await withInsertsFailing("oauth_refresh_tokens", () => h.anonymous.post("/v1/auth/email/verify", { email: fay.email, code }));
    expect(failed.status, JSON.stringify(failed.body)).toBeGreaterThanOrEqual(500);
    const retried = await h.anonymous.post("/v1/auth/email/verify", { email: fay.email, code });
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
    expect(await h.db.oAuthGrant.count({ where: { userId: fay.id } })).toBe(1);
    expect(retried.body.data).toMatchObject({ access_token: expect.any(String), refresh_token: expect.stringMatching(/^ert_/) });
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: fay.email, code })).status).toBe(401);
    // The grant, when the code asked for an exchange code; and the new account of an address signing up.
    const email = `hal-${Date.now()}@example.test`;
    const cli = await requestCode(email, { redirect_uri: "http://127.0.0.1:53682/callback" });
    expect((await withInsertsFailing("oauth_grants", () => h.anonymous.post("/v1/auth/email/verify", { email, code: cli.code }))).status).toBeGreaterThanOrEqual(500);
    const exchange = await h.anonymous.post("/v1/auth/email/verify", { email, code: cli.code });
    expect(exchange.status, JSON.stringify(exchange.body)).toBe(200);
    expect(exchange.body.data).toMatchObject({ status: "ok", code: expect.stringMatching(/^eac_/) });
  });

  it("a code whose sign-in failed is given back while a newer code's mail is still being sent, and that refused send leaves it working", async () => {
    const tia = await h.user("Tia");
    const { code } = await requestCode(tia.email);
    await h.db.emailSignInCode.updateMany({ where: { email: tia.email }, data: { createdAt: new Date(Date.now() - 61_000) } });
    let answer!: () => void;
    const slow = await startSmtp({ answerDataWhen: new Promise<void>((resolve) => (answer = resolve)), refuseData: true });
    process.env.SMTP_URL = slow.url;
    try {
      // A newer code is asked for; its relay is slow and will refuse it.
      const newer = h.anonymous.post("/v1/auth/email/request", { email: tia.email });
      for (let waited = 0; slow.messages.length < 1; waited += 20) {
        if (waited > 10_000) throw new Error("the slow relay never got the message");
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      // Meanwhile Tia types the code she has, and that sign-in fails after the check.
      const failed = await withInsertsFailing("oauth_refresh_tokens", () => h.anonymous.post("/v1/auth/email/verify", { email: tia.email, code }));
      expect(failed.status).toBeGreaterThanOrEqual(500);
      answer();
      expect((await newer).status).toBe(503);
    } finally {
      process.env.SMTP_URL = smtp.url;
      await slow.close();
    }
    // No newer mail was handed over: the code in her inbox works for the retry.
    const retried = await h.anonymous.post("/v1/auth/email/verify", { email: tia.email, code });
    expect(retried.status, JSON.stringify(retried.body)).toBe(200);
  });

  it("without SMTP_URL it says so, unless a development server returns codes; Memax's SDK signs in with them", async () => {
    delete process.env.SMTP_URL;
    try {
      expect((await h.anonymous.post("/v1/auth/email/request", { email: "eve@example.test" })).body.error.code).toBe("forbidden");
      process.env.ENGRAM_EMAIL_CODE_DEV_RETURN = "1";
      const eve = await h.user("Eve");
      const { Memax } = await loadMemaxSdk();
      const sdk = new Memax({ apiUrl: "http://engram.test", fetch: routeFetch, maxRetries: 0 });
      const sent = await sdk.auth.requestEmailOtp({ email: eve.email });
      expect(sent).toMatchObject({ status: "sent", email: eve.email, dev_code: expect.stringMatching(/^\d{6}$/) });
      const tokens = await sdk.auth.verifyEmailOtp({ email: eve.email, code: sent.dev_code });
      expect(tokens).toMatchObject({ access_token: expect.any(String), refresh_token: expect.any(String) });
    } finally {
      process.env.SMTP_URL = smtp.url;
    }
  });

  it("codes past the hour their address's cap counts are pruned; a fresh one stays and still works", async () => {
    const gus = await h.user("Gus");
    await requestCode(`gone-${Date.now()}@example.test`);
    const aged = await h.db.emailSignInCode.updateMany({ where: { email: { startsWith: "gone-" } }, data: { createdAt: new Date(Date.now() - 61 * 60_000) } });
    expect(aged.count).toBeGreaterThanOrEqual(1);
    const { code } = await requestCode(gus.email);
    expect(await pruneEmailSignInCodes(h.database)).toBeGreaterThanOrEqual(1);
    expect(await h.db.emailSignInCode.count({ where: { createdAt: { lt: new Date(Date.now() - 60 * 60_000) } } })).toBe(0);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: gus.email, code })).status).toBe(200);
  });

  it("a new account's name from a long address follows the name rule (at most 100 characters)", async () => {
    const email = `${"l".repeat(150)}@example.test`;
    const { code } = await requestCode(email);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email, code })).status).toBe(200);
    expect((await h.db.user.findUniqueOrThrow({ where: { email } })).name).toBe("l".repeat(100));
  });

  it("refuses malformed input with 400s", async () => {
    expect((await h.anonymous.post("/v1/auth/email/request", { email: "not an address" })).status).toBe(400);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: "a@example.test", code: "12345" })).status).toBe(400);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: "a@example.test", code: "abcdef" })).status).toBe(400);
  });
});

/** A password sign-up through the dashboard's route, as the browser posts it. */
function passwordSignUp(email: string, name: string, password: string) {
  return signUpRoute(
    new Request("http://engram.test/api/auth/sign-up", {
      method: "POST",
      headers: { "content-type": "application/json", "sec-fetch-site": "same-origin", origin: "http://engram.test" },
      body: JSON.stringify({ email, name, password }),
    }),
    { params: Promise.resolve({}) },
  );
}

describe("deliverMail", () => {
  it("a send nodemailer refuses before the relay has the message (no recipient, no response code) surely never left", async () => {
    const message = { to: "", subject: "Nobody", text: "nothing", kind: "test" };
    const row = await enqueueMail(h.db, message, new Date());
    const before = smtp.messages.length;
    const delivery = await deliverMail(h.db, row, message);
    expect(delivery).toMatchObject({ status: "failed", undelivered: true });
    expect(smtp.messages.length).toBe(before);
  });
});

describe("mailSurelyUndelivered", () => {
  it("classifies nodemailer's real failures against the SMTP fake: a message stream that failed before the relay accepted anything never left", async () => {
    // What nodemailer itself throws when sending `text` to `relay`.
    const failureOf = async (relay: Awaited<ReturnType<typeof startSmtp>>, text: string | Readable) => {
      const transport = nodemailer.createTransport(relay.url, { connectionTimeout: 2_000, greetingTimeout: 2_000, socketTimeout: 5_000 });
      try {
        await transport.sendMail({ from: "engram@example.test", to: "ann@example.test", subject: "s", text });
      } catch (error) {
        return error;
      } finally {
        transport.close();
      }
      throw new Error("the send did not fail");
    };
    // The message stream breaks mid-message (ESTREAM): the relay never got the closing dot, so it has nothing.
    const streaming = await startSmtp();
    try {
      const broken = new Readable({ read() {} });
      broken.push("the first half of the message\r\n");
      setTimeout(() => broken.destroy(new Error("the disk went away")), 50);
      const error = await failureOf(streaming, broken);
      expect(error).toMatchObject({ code: "ESTREAM" });
      expect(streaming.messages).toHaveLength(0);
      expect(mailSurelyUndelivered(error)).toBe(true);
    } finally {
      await streaming.close();
    }
    // A relay that refused the recipient: surely not delivered.
    const refusing = await startSmtp({ rejectRcpt: true });
    try {
      expect(mailSurelyUndelivered(await failureOf(refusing, "text"))).toBe(true);
    } finally {
      await refusing.close();
    }
    // smtps whose certificate the client refuses: the handshake failed before a byte of SMTP, so nothing left.
    const untrusted = await startSmtp({ tls: true });
    try {
      const error = await failureOf(untrusted, "text");
      expect(untrusted.messages).toHaveLength(0);
      expect(mailSurelyUndelivered(error)).toBe(true);
    } finally {
      await untrusted.close();
    }
    // smtps to a relay that speaks plain SMTP: the handshake never completes either.
    const plain = await startSmtp();
    try {
      const error = await failureOf({ ...plain, url: plain.url.replace("smtp://", "smtps://") }, "text");
      expect(plain.messages).toHaveLength(0);
      expect(mailSurelyUndelivered(error)).toBe(true);
    } finally {
      await plain.close();
    }
    // The connection dropped after the message was handed over: the relay may have queued it.
    const dropping = await startSmtp({ dropAfterData: true });
    try {
      const error = await failureOf(dropping, "text");
      expect(dropping.messages).toHaveLength(1);
      expect(mailSurelyUndelivered(error)).toBe(false);
    } finally {
      await dropping.close();
    }
  });
});

describe("names at sign-up", () => {
  it("a password sign-up's name follows the rename rule: line breaks are a 400 (invitations quote the name)", async () => {
    const signUp = (name: string) => passwordSignUp(`named-${Math.random().toString(36).slice(2)}@example.test`, name, "a long enough password");
    const forged = await signUp("Ann\n\nYour account is locked: https://evil.example/unlock");
    expect(forged.status).toBe(400);
    expect(((await forged.json()) as { error: { details: { issues: { path: string }[] } } }).error.details.issues[0]!.path).toBe("name");
    expect((await signUp("Zoë 👩‍💻")).status).toBe(201);
  });

  it("a provider's name is made to fit the rule instead of refusing the sign-in", () => {
    expect(providerUserName("Ann\n\nVerify at https://evil.example", "ann")).toBe("Ann Verify at https://evil.example");
    expect(providerUserName("  \u0007 ", "ann")).toBe("ann");
    expect(providerUserName(null, "ann")).toBe("ann");
    expect(Array.from(providerUserName("é".repeat(150), "ann"))).toHaveLength(100);
  });
});

describe("an account made by a password sign-up nobody proved", () => {
  it("is claimed by the first proof of its address: the squatter's password, keys, grants and sessions end", async () => {
    const email = `victim-${Date.now()}@corp.example`;
    const made = await passwordSignUp(email, "Not the owner", "squatter's password");
    expect(made.status).toBe(201);
    const userId = ((await made.json()) as { data: { user: { id: string } } }).data.user.id;
    const { key } = await insertApiKey(h.db, userId, "squatter", new Date());
    const cookie = await sessionCookieFor(h.db, userId);
    const asKey = () => h.anonymous.get("/v1/auth/me", { headers: { authorization: `Bearer ${key}` } });
    const asCookie = () => h.anonymous.get("/v1/auth/me", { headers: { cookie } });
    expect((await asKey()).status).toBe(200);
    expect((await asCookie()).status).toBe(200);
    await new Promise((r) => setTimeout(r, 1100)); // session times have one-second resolution

    // The address's owner signs in with a code mailed to it.
    const { code } = await requestCode(email);
    const signedIn = await h.anonymous.post("/v1/auth/email/verify", { email, code });
    expect(signedIn.status).toBe(200);
    const mine = await h.anonymous.get("/v1/auth/me", { headers: { authorization: `Bearer ${signedIn.body.data.access_token}` } });
    expect(mine.body.data.user.id).toBe(userId);
    expect((await asKey()).status).toBe(401);
    expect((await asCookie()).status).toBe(401);
    expect(await h.db.user.findUniqueOrThrow({ where: { id: userId } })).toMatchObject({ passwordHash: null, emailUnverified: false });
    // A fresh session of the new owner works.
    expect((await h.anonymous.get("/v1/auth/me", { headers: { cookie: await sessionCookieFor(h.db, userId) } })).status).toBe(200);
  });

  it("the squatter's linked GitHub account goes with the claim, so it cannot sign back in", async () => {
    const email = `linked-victim-${Date.now()}@corp.example`;
    const made = await passwordSignUp(email, "Not the owner", "squatter's password");
    expect(made.status).toBe(201);
    const userId = ((await made.json()) as { data: { user: { id: string } } }).data.user.id;
    // Signed in as the account, the squatter links their own GitHub account to it.
    expect(await githubSignIn("gh-squatter", "squatter@evil.example", {}, { userId, provider: "github" })).toBe(true);
    expect(await h.db.oAuthAccount.count({ where: { userId } })).toBe(1);

    const { code } = await requestCode(email);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email, code })).status).toBe(200);
    expect(await h.db.oAuthAccount.count({ where: { userId } })).toBe(0);
    // Their GitHub sign-in now lands in an account of their own address, not the claimed one.
    expect(await githubSignIn("gh-squatter", "squatter@evil.example")).toBe(true);
    const squatter = await h.db.oAuthAccount.findFirstOrThrow({ where: { provider: "github", providerAccountId: "gh-squatter" } });
    expect(squatter.userId).not.toBe(userId);
  });

  it("an account a GitHub sign-in made for an address GitHub had not verified is claimed by the first proof of it", async () => {
    const email = `gh-victim-${Date.now()}@corp.example`;
    expect(await githubSignIn("gh-unverified", email, { email_verified: false })).toBe(true);
    const made = await h.db.user.findUniqueOrThrow({ where: { email } });
    expect(made.emailUnverified).toBe(true);
    const { code } = await requestCode(email);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email, code })).status).toBe(200);
    expect(await h.db.oAuthAccount.count({ where: { userId: made.id } })).toBe(0);
    expect(await githubSignIn("gh-unverified", email, { email_verified: false })).toBe("/sign-in?error=OAuthAccountNotLinked");
    // A verified address makes a proven account, which a code sign-in leaves alone.
    const proven = `gh-owner-${Date.now()}@corp.example`;
    expect(await githubSignIn("gh-verified", proven, { email_verified: true })).toBe(true);
    const owner = await h.db.user.findUniqueOrThrow({ where: { email: proven } });
    expect(owner.emailUnverified).toBe(false);
    const again = await requestCode(proven);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: proven, code: again.code })).status).toBe(200);
    expect(await h.db.oAuthAccount.count({ where: { userId: owner.id } })).toBe(1);
  });

  it("a proven account is untouched by a code sign-in: its keys keep working", async () => {
    const ann = await h.user("Proven");
    const { code } = await requestCode(ann.email);
    expect((await h.anonymous.post("/v1/auth/email/verify", { email: ann.email, code })).status).toBe(200);
    expect((await ann.get("/v1/auth/me")).status).toBe(200);
  });
});
