import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { memax, scratchHome, startEngram, type CliResult, type Engram, type EngramUser } from "./support/engram.ts";

/**
 * Memax's real CLI, unchanged, against Engram's production build: hub
 * create/list/members, invite create/list/accept by a second user, and topic
 * create/list/set/delete. Each command must exit 0; the tests check its output
 * and the server state behind it. They run in order and build on each other.
 */
describe("Memax CLI: hubs, invites and topics", () => {
  let engram: Engram;
  let ada: EngramUser;
  let bo: EngramUser;
  const adaHome = scratchHome();
  const boHome = scratchHome();
  let hubId = "";
  let inviteUrl = "";
  let inviteId = "";
  let deploysId = "";
  let nestedId = "";
  let memoryId = "";

  const run = async (user: EngramUser, args: string[]): Promise<CliResult> => {
    const result = await memax(engram, args, { key: user.key, home: user === ada ? adaHome : boHome });
    expect(result.code, `memax ${args.join(" ")}\nstdout: ${result.stdout}\nstderr: ${result.stderr}`).toBe(0);
    return result;
  };

  beforeAll(async () => {
    engram = await startEngram();
    ada = await engram.user("Ada");
    bo = await engram.user("Bo");
  });
  afterAll(async () => {
    await engram?.stop();
  });

  it("hub create", async () => {
    const { stdout } = await run(ada, ["hub", "create", "Launch Crew"]);
    expect(stdout).toContain("Created hub: Launch Crew (launch-crew)");
    const hubs = (await ada.api("GET", "/v1/hubs")).body.data;
    const created = hubs.find((e: any) => e.hub.slug === "launch-crew");
    expect(created).toMatchObject({ role: "owner", hub: { name: "Launch Crew", hub_type: "team" } });
    hubId = created.hub.id;
    expect(stdout).toContain(`ID: ${hubId}`);
  });

  it("hub list", async () => {
    const text = (await run(ada, ["hub", "list"])).stdout;
    expect(text).toMatch(/Launch Crew \(team\) \[owner\]\s+launch-crew\s+/);
    expect(text).toMatch(/\(personal\) \[owner\]\s+personal/);
    const json = JSON.parse((await run(ada, ["hub", "list", "--format", "json"])).stdout);
    expect(json.map((e: any) => e.hub.id)).toEqual((await ada.api("GET", "/v1/hubs")).body.data.map((e: any) => e.hub.id));
  });

  it("hub invite create", async () => {
    const { stdout } = await run(ada, ["hub", "invite", "create", "--hub", "launch-crew", "--role", "viewer", "--format", "json"]);
    const out = JSON.parse(stdout);
    expect(out.invite).toMatchObject({ hub_id: hubId, role: "viewer" });
    expect(out.invite_url).toMatch(/\/invite\/egi_[A-Za-z0-9_-]{43}$/);
    inviteUrl = out.invite_url;
    inviteId = out.invite.id;
    const text = (await run(ada, ["hub", "invite", "create", "--hub", "launch-crew"])).stdout;
    expect(text).toContain("Invite created for Launch Crew");
    expect(text).toContain("role: contributor");
    expect(text).toMatch(/link: \S+\/invite\/egi_/);
  });

  it("hub invite list", async () => {
    const text = (await run(ada, ["hub", "invite", "list", "--hub", "launch-crew"])).stdout;
    expect(text).toContain("Outstanding invites for Launch Crew");
    expect(text).toContain(`${inviteId.slice(0, 8)} [viewer]`);
    expect(text).toContain("[contributor]");
    const json = JSON.parse((await run(ada, ["hub", "invite", "list", "--hub", "launch-crew", "--format", "json"])).stdout);
    expect(json).toHaveLength(2);
    expect(JSON.stringify(json)).not.toContain(inviteUrl.split("/invite/")[1]);
  });

  it("hub invite accept by a second user", async () => {
    const { stdout } = await run(bo, ["hub", "invite", "accept", inviteUrl]);
    expect(stdout).toContain("Joined hub: Launch Crew as viewer");
    const detail = await bo.api("GET", `/v1/hubs/${hubId}`);
    expect(detail.body.data.role).toBe("viewer");
    // The invite is used up: one left outstanding.
    expect((await ada.api("GET", `/v1/hubs/${hubId}/invites`)).body.data.map((i: any) => i.id)).not.toContain(inviteId);
  });

  it("hub members", async () => {
    const asOwner = (await run(ada, ["hub", "members", "launch-crew"])).stdout;
    expect(asOwner).toContain("Members for Launch Crew");
    expect(asOwner).toContain(`Ada <${ada.email}> [owner]`);
    expect(asOwner).toContain(`Bo <${bo.email}> [viewer]`);
    // A viewer sees the other member's address masked.
    const asViewer = (await run(bo, ["hub", "members", "launch-crew"])).stdout;
    expect(asViewer).toContain("Ada <a•••@example.test> [owner]");
    expect(asViewer).not.toContain(ada.email);
    const json = JSON.parse((await run(ada, ["hub", "members", "launch-crew", "--format", "json"])).stdout);
    expect(json.members.map((m: any) => [m.user_id, m.role])).toEqual([
      [ada.id, "owner"],
      [bo.id, "viewer"],
    ]);
  });

  it("topic create", async () => {
    const { stdout } = await run(ada, ["topic", "create", "Deploys", "--hub", "launch-crew", "-d", "How we ship", "-i", "rocket"]);
    expect(stdout).toContain("Created topic Deploys");
    const row = (await ada.api("GET", `/v1/topics?hub_id=${hubId}`)).body.data.topics.find((t: any) => t.name === "Deploys");
    expect(row).toMatchObject({ description: "How we ship", icon: "rocket", parent_id: null });
    deploysId = row.id;
    expect(stdout).toContain(`id: ${deploysId}`);
    const nested = (await run(ada, ["topic", "create", "Rollbacks", "--hub", "launch-crew", "--parent", deploysId.slice(0, 8)])).stdout;
    expect(nested).toContain("Created topic Rollbacks");
    nestedId = nested.match(/id: (\S+)/)![1]!;
    expect((await ada.api("GET", `/v1/topics/${nestedId}`)).body.data).toMatchObject({ parent_id: deploysId, hub_id: hubId });
  });

  it("topic set", async () => {
    memoryId = (await ada.api("POST", "/v1/memories", { content: "Roll back by redeploying the previous tag" }, { "x-hub-id": hubId })).body.data.id;
    const { stdout } = await run(ada, ["topic", "set", memoryId, "--topic", nestedId.slice(0, 8)]);
    expect(stdout).toContain("Memory topic updated");
    expect((await ada.api("GET", `/v1/memories/${memoryId}`)).body.data.topic_id).toBe(nestedId);
  });

  it("topic list", async () => {
    const text = (await run(ada, ["topic", "list", "--hub", "launch-crew"])).stdout;
    // Parents count their whole branch; children are indented under them.
    expect(text).toMatch(/rocket {2}Deploys \(1\)\n {2}id: [0-9a-f]{8}\n {2}folder {2}Rollbacks \(1\)\n {4}id: [0-9a-f]{8}/);
    expect(text).toContain("1 topics");
    const json = JSON.parse((await run(ada, ["topic", "list", "--hub", "launch-crew", "--format", "json"])).stdout);
    expect(json).toMatchObject({ unassigned_count: 0, topics: [{ id: deploysId, total_memory_count: 1, children: [{ id: nestedId, memory_count: 1 }] }] });
  });

  it("topic delete", async () => {
    const { stdout } = await run(ada, ["topic", "delete", deploysId.slice(0, 8), "--hub", "launch-crew"]);
    expect(stdout).toContain("Topic deleted");
    expect((await ada.api("GET", `/v1/topics?hub_id=${hubId}`)).body.data).toEqual({ topics: [], unassigned_count: 1 });
    // The memory stays, without a topic.
    expect((await ada.api("GET", `/v1/memories/${memoryId}`)).body.data.topic_id).toBeNull();
  });
});
