import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { encode } from "next-auth/jwt";
import bcrypt from "bcryptjs";
import { call, createHarness, type Client, type Harness } from "./support/harness.ts";
import { resolveSession, sessionSecret } from "@/lib/auth/session.ts";
import { POST as signUpRoute, GET as signUpGet } from "@/app/api/auth/sign-up/route.ts";
import { POST as nextAuthPost } from "@/app/api/auth/[...nextauth]/route.ts";
import { NextRequest } from "next/server";

let h: Harness;
let ann: Client;

/** A session cookie exactly as next-auth issues it (same encoder, same derived secret). */
async function sessionCookie(userId: string, name = "next-auth.session-token"): Promise<string> {
  const token = await encode({ token: { sub: userId, name: "Ann" }, secret: await sessionSecret(h.db) });
  return `${name}=${token}`;
}

function signUp(body: unknown, headers: Record<string, string> = {}) {
  const req = new Request("http://engram.test/api/auth/sign-up", {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return signUpRoute(req, { params: Promise.resolve({}) });
}

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  delete process.env.ENGRAM_ALLOW_SIGNUP;
  await h.close();
});

describe("browser session on /v1", () => {
  it("authenticates a GET with the session cookie alone", async () => {
    const res = await call("GET", "/v1/auth/me", undefined, { headers: { cookie: await sessionCookie(ann.id) } });
    expect(res.status).toBe(200);
    expect(res.body.data.user.id).toBe(ann.id);
    expect(res.body.data.credential).toMatchObject({ type: "session", scopes: ["read", "write"], hub_scope_mode: "all_accessible" });
  });

  it("accepts the __Secure- cookie served over https and other cookies around it", async () => {
    const cookie = `theme=dark; ${await sessionCookie(ann.id, "__Secure-next-auth.session-token")}; other=1`;
    const res = await call("GET", "/v1/memories", undefined, { headers: { cookie } });
    expect(res.status).toBe(200);
  });

  it("rejects a tampered or foreign session cookie with 401", async () => {
    const cookie = await sessionCookie(ann.id);
    const tampered = `${cookie.slice(0, -4)}AAAA`;
    const res = await call("GET", "/v1/auth/me", undefined, { headers: { cookie: tampered } });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe("unauthorized");
    const foreign = await encode({ token: { sub: ann.id }, secret: "some-other-instance-secret" });
    const res2 = await call("GET", "/v1/auth/me", undefined, { headers: { cookie: `next-auth.session-token=${foreign}` } });
    expect(res2.status).toBe(401);
  });

  it("rejects a session of a user that no longer exists", async () => {
    const res = await call("GET", "/v1/auth/me", undefined, {
      headers: { cookie: await sessionCookie("0190f0f0-0000-7000-8000-000000000000") },
    });
    expect(res.status).toBe(401);
  });

  it("refuses a cookie-authenticated POST without same-origin proof (403) and writes nothing", async () => {
    const cookie = await sessionCookie(ann.id);
    const before = await h.db.memory.count();
    const attempts: Record<string, string>[] = [
      { cookie },
      { cookie, "sec-fetch-site": "cross-site" },
      { cookie, "sec-fetch-site": "same-site" },
      { cookie, origin: "http://evil.test" },
      { cookie, origin: "null" },
    ];
    for (const headers of attempts) {
      const res = await call("POST", "/v1/memories", { content: "# Planted" }, { headers });
      expect(res.status, JSON.stringify(headers)).toBe(403);
      expect(res.body.error.code).toBe("forbidden");
      expect(res.body.error.message).toMatch(/Cross-site request refused/);
    }
    const del = await call("DELETE", "/v1/auth/api-keys/0190f0f0-0000-7000-8000-000000000000", undefined, { headers: { cookie } });
    expect(del.status).toBe(403);
    expect(await h.db.memory.count()).toBe(before);
  });

  it("accepts cookie-authenticated writes from the same origin", async () => {
    const cookie = await sessionCookie(ann.id);
    const viaFetchMetadata = await call("POST", "/v1/memories", { content: "# From the dashboard" }, {
      headers: { cookie, "sec-fetch-site": "same-origin" },
    });
    expect(viaFetchMetadata.status).toBe(201);
    expect(viaFetchMetadata.body.data.owner_id).toBe(ann.id);
    const viaOrigin = await call("POST", "/v1/memories", { content: "# Also from the dashboard" }, {
      headers: { cookie, origin: "http://engram.test" },
    });
    expect(viaOrigin.status).toBe(201);
  });

  it("leaves API-key requests unaffected, and the API key wins over a cookie", async () => {
    const res = await ann.post("/v1/memories", { content: "# From a script" });
    expect(res.status).toBe(201);
    const bob = await h.user("Bob");
    const both = await bob.get("/v1/auth/me", { headers: { cookie: await sessionCookie(ann.id) } });
    expect(both.status).toBe(200);
    expect(both.body.data.user.id).toBe(bob.id);
    expect(both.body.data.credential.type).toBe("api_key");
  });

  it("reads the user's row once per session check (every dashboard page and cookie request makes one)", async () => {
    let userReads = 0;
    const user = new Proxy(h.db.user, {
      get: (target, key) => {
        const value = Reflect.get(target, key);
        return typeof value === "function"
          ? (...args: unknown[]) => {
              userReads++;
              return value.apply(target, args);
            }
          : value;
      },
    });
    const db = new Proxy(h.db, { get: (target, key) => (key === "user" ? user : Reflect.get(target, key)) });
    const req = new Request("http://engram.test/v1/auth/me", { headers: { cookie: await sessionCookie(ann.id) } });
    const resolved = await resolveSession(db, req, new Date());
    expect(resolved.user).toEqual({ id: ann.id, email: ann.email, name: ann.name });
    expect(userReads).toBe(1);
  });
});

describe("sign-up", () => {
  it("creates a user with a bcrypt password hash and a personal hub", async () => {
    const res = await signUp({ email: "Cleo@Example.test", name: "Cleo", password: "correct horse battery" });
    expect(res.status).toBe(201);
    const { data } = await res.json();
    expect(data.user.email).toBe("cleo@example.test");
    const user = await h.db.user.findUniqueOrThrow({ where: { id: data.user.id } });
    expect(user.passwordHash).not.toContain("correct horse");
    expect(await bcrypt.compare("correct horse battery", user.passwordHash!)).toBe(true);
    const hub = await h.db.hub.findUniqueOrThrow({ where: { id: data.personal_hub_id } });
    expect(hub).toMatchObject({ hubType: "personal", ownerId: user.id });
  });

  it("rejects a taken email (409), a short password and a bad email (400)", async () => {
    const taken = await signUp({ email: "cleo@example.test", name: "Other", password: "another password" });
    expect(taken.status).toBe(409);
    const short = await signUp({ email: "dan@example.test", name: "Dan", password: "short" });
    expect(short.status).toBe(400);
    expect((await short.json()).error.details.issues[0].path).toBe("password");
    const long = await signUp({ email: "dan@example.test", name: "Dan", password: "é".repeat(40) });
    expect(long.status).toBe(400);
    const email = await signUp({ email: "not-an-email", name: "Dan", password: "long enough" });
    expect(email.status).toBe(400);
  });

  it("refuses sign-up posted from another site", async () => {
    const res = await signUp({ email: "eve@example.test", name: "Eve", password: "long enough pw" }, { "sec-fetch-site": "cross-site" });
    expect(res.status).toBe(403);
    expect(await h.db.user.findUnique({ where: { email: "eve@example.test" } })).toBeNull();
  });

  it("is closed with ENGRAM_ALLOW_SIGNUP=false (403) and creates nothing", async () => {
    process.env.ENGRAM_ALLOW_SIGNUP = "false";
    try {
      const users = await h.db.user.count();
      const res = await signUp({ email: "fay@example.test", name: "Fay", password: "long enough pw" });
      expect(res.status).toBe(403);
      const body = await res.json();
      expect(body.error.code).toBe("forbidden");
      expect(body.error.message).toMatch(/Sign-up is closed/);
      expect(await h.db.user.count()).toBe(users);
    } finally {
      delete process.env.ENGRAM_ALLOW_SIGNUP;
    }
  });

  it("answers other methods with a JSON 405", async () => {
    const res = await signUpGet(new Request("http://engram.test/api/auth/sign-up"), { params: Promise.resolve({}) });
    expect(res.status).toBe(405);
  });
});

describe("next-auth's endpoints (/api/auth/*)", () => {
  const post = (action: string[], init: { headers: Record<string, string>; body: BodyInit; duplex?: "half" }) =>
    nextAuthPost(new NextRequest(`http://engram.test/api/auth/${action.join("/")}`, { method: "POST", ...init }), {
      params: Promise.resolve({ nextauth: action }),
    });

  it("stops reading an oversized body at the cap (413) instead of buffering all of it, twice", async () => {
    const CHUNK = 64 * 1024;
    const TOTAL = 8 * 1024 * 1024;
    let pulled = 0;
    const body = new ReadableStream<Uint8Array>({
      pull(controller) {
        if (pulled >= TOTAL) return controller.close();
        pulled += CHUNK;
        controller.enqueue(new TextEncoder().encode(`email=${"a".repeat(CHUNK - 6)}`));
      },
    });
    const res = await post(["callback", "credentials"], { headers: { "content-type": "application/x-www-form-urlencoded" }, body, duplex: "half" }).catch(
      (error: unknown) => error,
    );
    expect(pulled).toBeLessThan(TOTAL / 4);
    expect(res).toBeInstanceOf(Response);
    expect((res as Response).status).toBe(413);
    expect((await (res as Response).json()).error.code).toBe("body_too_large");
  });

  it("answers a malformed JSON body with a 400 envelope, not a 500", async () => {
    const res = await post(["signin", "credentials"], { headers: { "content-type": "application/json" }, body: "{not json" }).catch((error: unknown) => error);
    expect(res).toBeInstanceOf(Response);
    expect((res as Response).status).toBe(400);
    expect((await (res as Response).json()).error.code).toBe("invalid_json");
  });
});
