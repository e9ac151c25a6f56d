import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { AuthContext } from "@/lib/api/context.ts";
import { addMember } from "@/lib/hubs/add-member.ts";
import { createHub } from "@/lib/hubs/create-hub.ts";
import { acceptInvite } from "@/lib/invites/accept-invite.ts";
import { createUser } from "@/lib/users/create-user.ts";
import { sessionContext } from "./support/changed-mid-request.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { openEventStream, type SseStream } from "./support/sse-client.ts";

// A member's joined_at bounds the hub events a resumed stream replays to them (created_at, written by
// the database's clock). It was written from the app host's clock: with that clock ahead of the
// database's, a new member's first events of the hub were never replayed.

const HOUR = 3_600_000;

let h: Harness;
let ann: Client;
const open: SseStream[] = [];
beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
});
afterAll(async () => {
  for (const s of open) await s.close();
  await h?.close();
});

/** `who` on an app host whose clock runs an hour ahead of the database's. */
function aheadOfDatabase(who: Client): AuthContext {
  return { ...sessionContext(h, who), now: () => new Date(Date.now() + HOUR) };
}

async function databaseNow(): Promise<Date> {
  const [row] = await h.db.$queryRaw<{ now: Date }[]>`SELECT clock_timestamp() AS now`;
  return row!.now;
}

async function push(client: Client, content: string, hubId: string): Promise<string> {
  const res = await client.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } });
  expect(res.status, res.text).toBe(201);
  return res.body.data.id;
}

describe("a member's join time and the events replayed to them", () => {
  it("a member added by an app host whose clock is ahead gets the hub's events since, on resume", async () => {
    const dana = await h.user("Dana");
    const hubId = await h.teamHub(ann);
    expect((await ann.post(`/v1/hubs/${hubId}/invites`, { email: dana.email })).status).toBe(201);
    await addMember(aheadOfDatabase(ann), hubId, { user_id: dana.id, role: "viewer" });
    const note = await push(ann, "Dana joined in time for this one.", hubId);
    const s = await openEventStream(dana.key, "", { "last-event-id": "0" });
    open.push(s);
    expect(s.status).toBe(200);
    const marker = await push(ann, "A marker after the replay.", hubId);
    await s.waitFor((e) => e.data?.entity_id === marker);
    expect(s.payload().map((e) => e.data?.entity_id)).toContain(note);
  });

  it("joined_at follows the database's clock for a member by invite, a new hub's owner and a new user's personal hub", async () => {
    const eve = await h.user("Eve");
    const hubId = await h.teamHub(ann);
    const invite = await ann.post(`/v1/hubs/${hubId}/invites`);
    expect(invite.status, invite.text).toBe(201);
    await acceptInvite(aheadOfDatabase(eve), invite.body.data.token);
    const created = await createHub(aheadOfDatabase(ann), { name: "Skewed" } as Parameters<typeof createHub>[1]);
    const user = await createUser(h.db, { email: "skewed@example.test", name: "Skewed" }, new Date(Date.now() + HOUR));
    const after = await databaseNow();
    for (const [hub, userId] of [[hubId, eve.id], [created.id, ann.id], [user.hub.id, user.user.id]] as const) {
      const member = await h.db.hubMember.findUniqueOrThrow({ where: { hubId_userId: { hubId: hub, userId } } });
      expect(member.joinedAt.getTime(), `${hub}`).toBeLessThanOrEqual(after.getTime());
    }
  });
});
