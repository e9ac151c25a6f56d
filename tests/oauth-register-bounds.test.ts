import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { newId } from "@/lib/ids.ts";
import { pruneUnusedOAuthClients } from "@/lib/oauth/prune-unused-clients.ts";
import { createHarness, type Harness } from "./support/harness.ts";
import { routerFor } from "./support/router.ts";

const dispatch = routerFor(["oauth"]);
const HOUR = 60 * 60_000;
let h: Harness;

beforeAll(async () => {
  h = await createHarness();
});
afterAll(async () => {
  await h.close();
});
afterEach(async () => {
  delete process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR;
  await h.db.oAuthClient.deleteMany({});
});

const BULK = { client_name: "Bulk", redirect_uris: Array.from({ length: 10 }, (_, i) => `https://c.example/${"x".repeat(1400)}/${i}`) };

async function register(metadata: Record<string, unknown> = BULK) {
  const res = await dispatch(
    new Request("http://engram.test/oauth/register", { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(metadata) }),
  );
  return { status: res.status, body: (await res.json()) as Record<string, string> };
}

async function grantFor(clientId: string) {
  const ann = await h.user("Ann");
  await h.db.oAuthGrant.create({ data: { id: newId(), userId: ann.id, clientId, hubIds: [], allHubs: true, scope: "read", resource: "http://engram.test/mcp" } });
}

describe("dynamic client registration bounds", () => {
  it("refuses registrations past the hourly cap of never-used clients, counting neither used nor older clients", async () => {
    process.env.ENGRAM_OAUTH_REGISTRATIONS_PER_HOUR = "3";
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await register();
      expect(res.status).toBe(201);
      ids.push(res.body.client_id!);
    }
    const refused = await register();
    expect(refused.status).toBe(429);
    expect(refused.body.error).toBe("temporarily_unavailable");
    expect(await h.db.oAuthClient.count()).toBe(3);

    // A client someone consented to is no longer counted against the cap.
    await grantFor(ids[0]!);
    expect((await register()).status).toBe(201);
    expect((await register()).status).toBe(429);

    // Nor is one registered over an hour ago.
    await h.db.oAuthClient.update({ where: { id: ids[1]! }, data: { createdAt: new Date(Date.now() - 2 * HOUR) } });
    expect((await register()).status).toBe(201);
  });

  it("prunes clients that never obtained a grant after a day, keeping used, recent and built-in ones", async () => {
    const old = new Date(Date.now() - 25 * HOUR);
    const client = (id: string, kind: string, createdAt: Date) => ({ id, name: id, redirectUris: ["https://c.example/cb"], kind, createdAt });
    await h.db.oAuthClient.createMany({
      data: [
        client("ec_old_unused", "registered", old),
        client("ec_old_used", "registered", old),
        client("ec_recent_unused", "registered", new Date(Date.now() - HOUR)),
        client("https://doc.example/client.json", "metadata_document", old),
        client("memax-cli", "builtin", old),
      ],
    });
    await grantFor("ec_old_used");
    expect(await pruneUnusedOAuthClients(h.database)).toBe(2);
    const left = (await h.db.oAuthClient.findMany({ select: { id: true }, orderBy: { id: "asc" } })).map((row) => row.id);
    expect(left).toEqual(["ec_old_used", "ec_recent_unused", "memax-cli"]);
  });

  it("metadata with a NUL or other control characters is refused or cleaned, never a 500", async () => {
    for (const uri of ["https://c.example/c\u0000b", "cursor://x/\u0000", "https://c.example/a b", "https://c.example/\n"]) {
      const res = await register({ redirect_uris: [uri] });
      expect(res.status, JSON.stringify(uri)).toBe(400);
      expect(res.body.error).toBe("invalid_redirect_uri");
    }
    const named = await register({ client_name: "Evil\u0000\nApp", client_uri: "https://c.example/\u0000", redirect_uris: ["https://c.example/cb"] });
    expect(named.status).toBe(201);
    expect(named.body.client_name).toBe("Evil  App");
    expect(named.body.client_uri).toBeUndefined();
    expect((await h.db.oAuthClient.findUniqueOrThrow({ where: { id: named.body.client_id! } })).name).toBe("Evil  App");
  });
});
