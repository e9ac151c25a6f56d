import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { setBlobStore } from "@/lib/blobs/blob-store.ts";
import { LocalBlobStore } from "@/lib/blobs/local-blob-store.ts";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { clientFor, createHarness, type ApiResponse, type Client, type Harness } from "./support/harness.ts";
import { dispatch, listRouteFiles } from "./support/router.ts";
import { newId } from "@/lib/ids.ts";
import { customBoardsIdle } from "@/lib/boards/kick-custom-board.ts";
import { chatTurnsIdle } from "@/lib/chat/chat-turn-runner.ts";
import { SOCKET_ADDRESS_HEADER } from "@/lib/api/client-address.ts";
import { MemoryRateLimiter, setRateLimiter } from "@/lib/api/rate-limit.ts";
import { frozenLimiter, HARNESS_LIMITS } from "./support/harness.ts";
import { addMemberByEmailInvite } from "./support/add-member.ts";

/**
 * Every /v1 route × method, called as each identity, must answer the status in
 * ROUTES and never show data of a hub the caller cannot read. A route file
 * (or method) without a row here fails "every route has a row": add one.
 */

const BASE_IDENTITIES = ["anonymous", "invalid_key", "non_member", "viewer", "contributor", "admin", "owner"] as const;
/**
 * The owner's own API keys, limited: `hub_key` reaches only the owner's personal hub (so the
 * fixture hub must look exactly as it does to a non-member), `read_key` is read-only (owner's
 * reads, 403 on every write). Their statuses follow from the others unless a row says otherwise.
 */
const KEY_IDENTITIES = ["hub_key", "read_key"] as const;
const IDENTITIES = [...BASE_IDENTITIES, ...KEY_IDENTITIES] as const;
type Identity = (typeof IDENTITIES)[number];
type Expect = Record<(typeof BASE_IDENTITIES)[number], number> & Partial<Record<(typeof KEY_IDENTITIES)[number], number>>;

/** Routes that manage the account itself: a key limited to hubs or to reading gets 403. */
const ACCOUNT_ROUTES = new Set(["PATCH /v1/auth/me", "DELETE /v1/auth/oauth-grants/[id]", "POST /v1/auth/api-keys", "PATCH /v1/auth/api-keys/[id]", "DELETE /v1/auth/api-keys/[id]", "POST /v1/hubs", "PATCH /v1/agents/[slug]", "DELETE /v1/agents/[slug]", "DELETE /v1/auth/link/[provider]", "DELETE /v1/account/data"]);
/**
 * The caller's account data beyond memories (agent configs and sessions, personas, settings, agents):
 * a key limited to hubs gets 403, as a team bot's key must not read its owner's private transcripts.
 */
const PERSONAL_PREFIXES = ["/v1/configs", "/v1/personas", "/v1/agent-sessions", "/v1/settings", "/v1/agents"];
const isPersonal = (key: string) => PERSONAL_PREFIXES.some((prefix) => key.split(" ")[1]!.startsWith(prefix));
/** POSTs that only read. */
const READ_POSTS = new Set(["POST /v1/recall", "POST /v1/ask", "POST /v1/hubs/[id]/visit", "POST /v1/topics/[id]/visit", "POST /v1/memories/[id]/attachments/[attachmentId]/view-url", "POST /v1/configs/sync", "POST /v1/configs/merge", "POST /v1/memories/[id]/access"]);

function expectedStatus(key: string, row: Row, identity: Identity): number {
  const given = row.expect[identity as keyof Expect];
  if (given !== undefined) return given;
  if (key.includes("[[...path]]")) return 404;
  // Public routes do not look at the credential.
  if (row.expect.anonymous !== 401) return row.expect.owner;
  if (identity === "hub_key") return ACCOUNT_ROUTES.has(key) || isPersonal(key) ? 403 : row.expect.non_member;
  return key.startsWith("GET ") || READ_POSTS.has(key) ? row.expect.owner : 403;
}

interface Fixture {
  hubId: string;
  hubName: string;
  hubSlug: string;
  secretTitle: string;
  secretContent: string;
  secretMemoryId: string;
  inviteId: string;
  inviteToken: string;
  users: Record<"viewer" | "contributor" | "admin" | "owner" | "non_member" | "spare", Client>;
  /** Filled by a row's setup. */
  extra: Record<string, string>;
}

interface Row {
  path: (f: Fixture) => string;
  body?: (f: Fixture, me: Client | undefined) => unknown;
  headers?: (f: Fixture) => Record<string, string>;
  setup?: (f: Fixture) => Promise<void>;
  expect: Expect;
  /** Identities outside the hub that may legitimately see it here (the invite token is the capability). */
  reveals?: Identity[];
  /** Strings an identity must not see in the response (e.g. other members' e-mail addresses). */
  hides?: Partial<Record<Identity, (f: Fixture) => string[]>>;
  /** A success that is not JSON (a file download) has this content type. */
  contentType?: string;
}

/** A row key is "METHOD /pattern", optionally followed by " — variant" for a second case of the same route. */
const routeOf = (key: string) => key.split(" — ")[0]!;

/** Contributors and viewers get other members' e-mails masked (issue 18, item 5). */
const otherMembersEmails = (self: "viewer" | "contributor") => (f: Fixture) =>
  (["owner", "admin", "contributor", "viewer"] as const).filter((r) => r !== self).map((r) => f.users[r].email);
const memberEmailsHidden = { viewer: otherMembersEmails("viewer"), contributor: otherMembersEmails("contributor") };

// Status shorthands: what each identity gets when the route works on the fixture hub.
const unauth = { anonymous: 401, invalid_key: 401 };
const anyUser = (status: number): Expect => ({ ...unauth, non_member: status, viewer: status, contributor: status, admin: status, owner: status });
const publicRoute = (status: number): Expect => ({ ...anyUser(status), anonymous: status, invalid_key: status });
const hubRead = (status: number): Expect => ({ ...anyUser(status), non_member: 404 });
const hubWrite = (status: number): Expect => ({ ...hubRead(status), viewer: 403 });
const hubManage = (status: number): Expect => ({ ...hubWrite(status), contributor: 403 });
const hubOwn = (status: number): Expect => ({ ...hubManage(status), admin: 403 });

const hub = (f: Fixture) => `/v1/hubs/${f.hubId}`;
const inHub = (f: Fixture) => ({ "x-hub-id": f.hubId });

const ROUTES: Record<string, Row> = {
  // Foundation
  "GET /v1/health": { path: () => "/v1/health", expect: publicRoute(200) },
  "GET /v1/openapi.json": { path: () => "/v1/openapi.json", expect: publicRoute(200) },
  "POST /v1/admin/users": { path: () => "/v1/admin/users", body: () => ({ email: "x@example.test", name: "X" }), expect: publicRoute(404) },
  // Without ENGRAM_ADMIN_TOKEN the route does not exist for any method (405 only once it is set).
  "GET /v1/admin/users": { path: () => "/v1/admin/users", expect: publicRoute(404) },
  "PUT /v1/admin/users": { path: () => "/v1/admin/users", body: () => ({}), expect: publicRoute(404) },
  "PATCH /v1/admin/users": { path: () => "/v1/admin/users", body: () => ({}), expect: publicRoute(404) },
  "DELETE /v1/admin/users": { path: () => "/v1/admin/users", expect: publicRoute(404) },
  // Impersonation is an admin route: without ENGRAM_ADMIN_TOKEN it does not exist for any method.
  "POST /v1/auth/impersonate": { path: () => "/v1/auth/impersonate", body: () => ({ email: "x@example.test" }), expect: publicRoute(404) },
  ...Object.fromEntries(["GET", "PUT", "PATCH", "DELETE"].map((m) => [`${m} /v1/auth/impersonate`, { path: () => "/v1/auth/impersonate", ...(m !== "GET" && m !== "DELETE" && { body: () => ({}) }), expect: publicRoute(404) }])),
  "GET /v1/auth/me": { path: () => "/v1/auth/me", expect: anyUser(200) },
  "PATCH /v1/auth/me": { path: () => "/v1/auth/me", body: (_f, me) => ({ name: me?.name ?? "Nobody" }), expect: anyUser(200) },
  // Other keys and grants name the hubs they reach: not for a key limited to some hubs.
  "GET /v1/auth/api-keys": { path: () => "/v1/auth/api-keys", expect: { ...anyUser(200), hub_key: 403 } },
  "POST /v1/auth/api-keys": { path: () => "/v1/auth/api-keys", body: () => ({ name: "extra" }), expect: anyUser(201) },
  // Someone else's key is simply not found.
  "PATCH /v1/auth/api-keys/[id]": {
    setup: async (f) => {
      f.extra.keyId = (await f.users.owner.post("/v1/auth/api-keys", { name: "spare" })).body.data.id;
    },
    path: (f) => `/v1/auth/api-keys/${f.extra.keyId}`,
    body: () => ({ agent_name: "cursor" }),
    expect: { ...anyUser(404), owner: 200 },
  },
  // Idempotent: someone else's key answers 200 { revoked: false } (and stays valid: see auth.test.ts).
  "DELETE /v1/auth/api-keys/[id]": {
    setup: async (f) => {
      f.extra.keyId = (await f.users.owner.post("/v1/auth/api-keys", { name: "spare" })).body.data.id;
    },
    path: (f) => `/v1/auth/api-keys/${f.extra.keyId}`,
    expect: anyUser(200),
  },
  // `memax login`: public; without a loopback redirect_uri, or with an empty body, nothing happens (tests/cli-login.test.ts walks the flow).
  "GET /v1/auth/github": { path: () => "/v1/auth/github", expect: publicRoute(400) },
  "GET /v1/auth/google": { path: () => "/v1/auth/google?redirect_uri=https%3A%2F%2Fevil.example%2Fcb", expect: publicRoute(400) },
  "POST /v1/auth/exchange": { path: () => "/v1/auth/exchange", body: () => ({}), expect: publicRoute(400) },
  "POST /v1/auth/refresh": { path: () => "/v1/auth/refresh", body: () => ({ token: "ert_unknown" }), expect: publicRoute(400) },
  // Connected agents are per user: another user's agent of the same name is not found (PATCH) or a not_found skip (DELETE, always 200).
  "GET /v1/agents": { path: () => "/v1/agents", expect: anyUser(200) },
  "PATCH /v1/agents/[slug]": {
    setup: async (f) => {
      await f.users.owner.post("/v1/auth/api-keys", { name: "agent", agent_name: "security-agent" });
    },
    path: () => "/v1/agents/security-agent",
    body: () => ({ icon: "🛡" }),
    expect: { ...anyUser(404), owner: 200 },
  },
  "DELETE /v1/agents/[slug]": { path: () => "/v1/agents/security-agent", expect: anyUser(200) },
  // Each identity empties only its own account (a fresh fixture per identity).
  "DELETE /v1/account/data": { path: () => "/v1/account/data", expect: anyUser(200) },
  "GET /v1/plans": { path: () => "/v1/plans", expect: anyUser(200) },
  "GET /v1/auth/identities": { path: () => "/v1/auth/identities", expect: anyUser(200) },
  // Nobody in the fixture signs in with GitHub: the caller's own (absent) link is not found.
  "DELETE /v1/auth/link/[provider]": { path: () => "/v1/auth/link/github", expect: anyUser(404) },
  // The browser link flow looks only at the dashboard's cookie; without GitHub configured there is nothing to link.
  "GET /v1/auth/link/[provider]": { path: () => "/v1/auth/link/github", expect: publicRoute(404) },
  // E-mail sign-in codes: public; an empty body changes nothing (tests/email-sign-in.test.ts walks the flow).
  "POST /v1/auth/email/request": { path: () => "/v1/auth/email/request", body: () => ({}), expect: publicRoute(400) },
  "POST /v1/auth/email/verify": { path: () => "/v1/auth/email/verify", body: () => ({}), expect: publicRoute(400) },
  "GET /v1/auth/oauth-grants": { path: () => "/v1/auth/oauth-grants", expect: { ...anyUser(200), hub_key: 403 } },
  "DELETE /v1/auth/oauth-grants/[id]": {
    setup: async (f) => {
      f.extra.grantId = await ownerGrant(f);
    },
    path: (f) => `/v1/auth/oauth-grants/${f.extra.grantId}`,
    expect: { ...anyUser(404), owner: 200 },
  },
  ...Object.fromEntries(
    ["GET", "POST", "PUT", "PATCH", "DELETE"].map((m) => [`${m} /v1/[[...path]]`, { path: () => "/v1/no-such-endpoint", expect: publicRoute(404) }]),
  ),

  // Memories
  "POST /v1/memories": { path: () => "/v1/memories", headers: inHub, body: () => ({ content: `new ${randomBytes(4).toString("hex")}` }), expect: hubWrite(201) },
  "GET /v1/memories": { path: (f) => `/v1/memories?hub_id=${f.hubId}`, expect: hubRead(200) },
  "GET /v1/memories/[id]": { path: (f) => `/v1/memories/${f.secretMemoryId}`, expect: hubRead(200) },
  "PATCH /v1/memories/[id]": { path: (f) => `/v1/memories/${f.secretMemoryId}`, body: () => ({ tags: ["x"] }), expect: { ...hubManage(200) } },
  "DELETE /v1/memories/[id]": { path: (f) => `/v1/memories/${f.secretMemoryId}`, expect: hubManage(200) },
  "GET /v1/bar/search": { path: (f) => `/v1/bar/search?hub_id=${f.hubId}&q=${encodeURIComponent(f.secretTitle.split(" ")[0]!)}`, expect: hubRead(200) },
  // Into the caller's own hub: a reader may share (the target decides the write), a stranger finds nothing.
  "POST /v1/memories/[id]/share": {
    path: (f) => `/v1/memories/${f.secretMemoryId}/share`,
    body: (f, me) => ({ target_hub_id: me?.personalHubId ?? f.hubId }),
    expect: hubRead(201),
  },
  "GET /v1/memories/search": { path: (f) => `/v1/memories/search?hub_id=${f.hubId}&q=${encodeURIComponent(f.secretTitle.split(" ")[0]!)}`, expect: hubRead(200) },
  "GET /v1/memories/[id]/related": { path: (f) => `/v1/memories/${f.secretMemoryId}/related`, expect: hubRead(200) },
  "POST /v1/memories/[id]/access": { path: (f) => `/v1/memories/${f.secretMemoryId}/access`, expect: hubRead(200) },
  "POST /v1/memories/batch-delete": { path: () => "/v1/memories/batch-delete", body: (f) => ({ ids: [f.secretMemoryId] }), expect: anyUser(200) },
  "POST /v1/memories/batch-move": {
    path: () => "/v1/memories/batch-move",
    body: (f) => ({ ids: [f.secretMemoryId], hub_id: f.hubId }),
    expect: hubWrite(200),
  },
  // Recall narrows hub_ids to the readable hubs instead of answering 404 (lib/recall's choice); the leak check still applies.
  "POST /v1/recall": { path: () => "/v1/recall", body: (f) => ({ query: "classified content", hub_ids: [f.hubId], no_rerank: true }), expect: anyUser(200) },

  // Files
  "POST /v1/uploads": {
    path: () => "/v1/uploads",
    headers: inHub,
    body: () => ({ filename: "a.txt", content_type: "text/plain", size_bytes: 5, purpose: "memory_attachment" }),
    expect: hubWrite(201),
  },
  "GET /v1/memories/[id]/attachments/[attachmentId]/download": {
    setup: ownerFile,
    path: (f) => `/v1/memories/${f.extra.fileMemoryId}/attachments/${f.extra.attachmentId}/download`,
    expect: hubRead(200),
    contentType: "image/png",
  },
  "POST /v1/memories/[id]/attachments/[attachmentId]/view-url": {
    setup: ownerFile,
    path: (f) => `/v1/memories/${f.extra.fileMemoryId}/attachments/${f.extra.attachmentId}/view-url`,
    expect: hubRead(200),
  },
  // The embedded store's signed URLs: the signature is the capability, a credential adds nothing.
  "PUT /v1/blobs/[...key]": { path: (f) => `/v1/blobs/uploads/${f.users.owner.id}/x?op=put&type=text/plain&size=5&expires=9999999999&sig=forged`, expect: publicRoute(403) },
  "GET /v1/blobs/[...key]": { path: (f) => `/v1/blobs/uploads/${f.users.owner.id}/x?op=get&expires=9999999999&sig=forged`, expect: publicRoute(403) },

  // Hubs
  "GET /v1/hubs": { path: () => "/v1/hubs", expect: anyUser(200) },
  "POST /v1/hubs": { path: () => "/v1/hubs", body: () => ({ name: "Another hub" }), expect: anyUser(201) },
  "GET /v1/hubs/check-slug": { path: () => "/v1/hubs/check-slug?slug=some-free-slug", expect: anyUser(200) },
  "GET /v1/hubs/[id]": { path: hub, expect: hubRead(200), hides: memberEmailsHidden },
  "PATCH /v1/hubs/[id]": { path: hub, body: () => ({ allow_contributor_topics: true }), expect: hubManage(200) },
  "DELETE /v1/hubs/[id]": { path: hub, expect: hubOwn(200) },
  "GET /v1/hubs/[id]/summary": { path: (f) => `${hub(f)}/summary`, expect: hubRead(200) },
  "POST /v1/hubs/[id]/visit": { path: (f) => `${hub(f)}/visit`, expect: hubRead(200) },
  "GET /v1/hubs/[id]/board": { path: (f) => `${hub(f)}/board`, expect: hubRead(200) },
  "POST /v1/hubs/[id]/board/decision-gate": {
    path: (f) => `${hub(f)}/board/decision-gate`,
    body: () => ({ question: "Ship on Friday?", options: ["yes", "no"] }),
    expect: hubWrite(201),
  },
  "POST /v1/hubs/[id]/board/slots/[slot_key]/resolve": {
    setup: async (f) => {
      const gate = await f.users.owner.post(`${hub(f)}/board/decision-gate`, { question: "Which region?", options: ["eu", "us"] });
      f.extra.slotKey = gate.body.data.slot.slot_key;
    },
    path: (f) => `${hub(f)}/board/slots/${encodeURIComponent(f.extra.slotKey ?? "decision:00000000-0000-7000-8000-000000000000")}/resolve`,
    body: () => ({ action: "choose", choice: "eu" }),
    expect: hubWrite(200),
  },
  "GET /v1/hubs/[id]/boards": { path: (f) => `${hub(f)}/boards`, expect: hubRead(200) },
  "GET /v1/hubs/[id]/boards/[board_id]": { path: (f) => `${hub(f)}/boards/${f.hubId}`, expect: hubRead(200) },
  "POST /v1/hubs/[id]/boards": { path: (f) => `${hub(f)}/boards`, body: () => ({ title: "Readiness", instruction: "What is open?" }), expect: hubWrite(201) },
  // A custom board changes by its creator (the owner here) or a hub manager.
  "PATCH /v1/hubs/[id]/boards/[board_id]": { setup: ownerCustomBoard, path: (f) => `${hub(f)}/boards/${f.extra.boardId}`, body: () => ({ title: "Renamed" }), expect: hubManage(200) },
  "DELETE /v1/hubs/[id]/boards/[board_id]": { setup: ownerCustomBoard, path: (f) => `${hub(f)}/boards/${f.extra.boardId}`, expect: hubManage(200) },
  "GET /v1/hubs/[id]/board/slots/[slot_key]/history": {
    setup: async (f) => {
      const gate = await f.users.owner.post(`${hub(f)}/board/decision-gate`, { question: "Which zone?", options: ["a", "b"] });
      f.extra.historyKey = gate.body.data.slot.slot_key;
    },
    path: (f) => `${hub(f)}/board/slots/${encodeURIComponent(f.extra.historyKey!)}/history`,
    expect: hubRead(200),
  },
  "GET /v1/hubs/[id]/members": { path: (f) => `${hub(f)}/members`, expect: hubRead(200), hides: memberEmailsHidden },
  "POST /v1/hubs/[id]/members": {
    // The owner e-mailed Spare an invite, so managers can find them by id.
    setup: async (f) => {
      expect((await f.users.owner.post(`${hub(f)}/invites`, { role: "viewer", email: f.users.spare.email })).status).toBe(201);
    },
    path: (f) => `${hub(f)}/members`,
    body: (f) => ({ user_id: f.users.spare.id, role: "viewer" }),
    expect: hubManage(201),
  },
  // Issue 18 item 5: a bare user id finds nobody, and the answer never carries their e-mail.
  "POST /v1/hubs/[id]/members — a user the adder cannot find": {
    path: (f) => `${hub(f)}/members`,
    body: (f) => ({ user_id: f.users.spare.id, role: "viewer" }),
    expect: { ...hubManage(404) },
    hides: Object.fromEntries(IDENTITIES.map((i) => [i, (f: Fixture) => [f.users.spare.email]])),
  },
  "PATCH /v1/hubs/[id]/members/[user_id]": {
    path: (f) => `${hub(f)}/members/${f.users.viewer.id}`,
    body: () => ({ role: "contributor" }),
    expect: hubManage(200),
  },
  // A viewer removing themself is leaving, which any non-owner may do.
  "DELETE /v1/hubs/[id]/members/[user_id]": { path: (f) => `${hub(f)}/members/${f.users.viewer.id}`, expect: { ...hubManage(200), viewer: 200 } },
  "POST /v1/hubs/[id]/leave": { path: (f) => `${hub(f)}/leave`, expect: { ...hubRead(200), owner: 400 } },
  "POST /v1/hubs/[id]/ownership-transfer": {
    path: (f) => `${hub(f)}/ownership-transfer`,
    body: (f) => ({ target_user_id: f.users.admin.id }),
    expect: hubOwn(201),
  },
  "POST /v1/hubs/[id]/ownership-transfer/[transfer_id]/accept": {
    setup: offerToAdmin,
    path: (f) => `${hub(f)}/ownership-transfer/${f.extra.transferId}/accept`,
    expect: { ...hubRead(403), admin: 200 },
  },
  "POST /v1/hubs/[id]/ownership-transfer/[transfer_id]/cancel": {
    setup: offerToAdmin,
    path: (f) => `${hub(f)}/ownership-transfer/${f.extra.transferId}/cancel`,
    expect: { ...hubRead(403), admin: 200, owner: 200 },
  },
  // A read-only key acts as a viewer: it reads memories, topics and members, not the hub's management data.
  "GET /v1/hubs/[id]/invites": { path: (f) => `${hub(f)}/invites`, expect: { ...hubManage(200), read_key: 403 } },
  "GET /v1/hubs/[id]/mail": { path: (f) => `${hub(f)}/mail`, expect: { ...hubManage(200), read_key: 403 } },
  "POST /v1/hubs/[id]/invites": { path: (f) => `${hub(f)}/invites`, body: () => ({ role: "viewer" }), expect: hubManage(201) },
  "DELETE /v1/hubs/[id]/invites/[invite_id]": { path: (f) => `${hub(f)}/invites/${f.inviteId}`, expect: hubManage(200) },
  "POST /v1/hubs/[id]/invites/[invite_id]/regenerate": { path: (f) => `${hub(f)}/invites/${f.inviteId}/regenerate`, expect: hubManage(200) },
  "POST /v1/hubs/[id]/invites/[invite_id]/resend": { path: (f) => `${hub(f)}/invites/${f.inviteId}/resend`, expect: hubManage(200) },
  "GET /v1/invites/[token]": { path: (f) => `/v1/invites/${f.inviteToken}`, expect: publicRoute(200), reveals: ["anonymous", "invalid_key", "non_member"] },
  "POST /v1/invites/[token]/accept": {
    path: (f) => `/v1/invites/${f.inviteToken}/accept`,
    expect: { ...unauth, non_member: 200, viewer: 409, contributor: 409, admin: 409, owner: 409, hub_key: 403 },
    reveals: ["non_member"],
  },

  // Agent configs and sessions belong to the caller, not to a hub: another user's config is not found.
  // A key limited to hubs does not reach them (isPersonal).
  "GET /v1/configs": { path: () => "/v1/configs", expect: anyUser(200) },
  "PUT /v1/configs": { path: () => "/v1/configs", body: () => ({ agent: "cursor", file_path: `r-${randomBytes(4).toString("hex")}.md`, scope: "global", content: "x" }), expect: anyUser(201) },
  "GET /v1/configs/[id]": { setup: ownerConfig, path: (f) => `/v1/configs/${f.extra.configId}`, expect: { ...anyUser(404), owner: 200 } },
  "DELETE /v1/configs/[id]": { setup: ownerConfig, path: (f) => `/v1/configs/${f.extra.configId}`, expect: { ...anyUser(404), owner: 200 } },
  // Personas are the owner's configs: as configs, the owner's hub-limited key does not reach them.
  "GET /v1/personas": { path: () => "/v1/personas", expect: anyUser(200) },
  "DELETE /v1/personas/[id]": { setup: ownerPersona, path: (f) => `/v1/personas/${f.extra.configId}`, expect: { ...anyUser(404), owner: 200 } },
  "GET /v1/personas/[id]/revisions": { setup: ownerPersona, path: (f) => `/v1/personas/${f.extra.configId}/revisions`, expect: { ...anyUser(404), owner: 200 } },
  "GET /v1/personas/[id]/revisions/[version]": { setup: ownerPersona, path: (f) => `/v1/personas/${f.extra.configId}/revisions/1`, expect: { ...anyUser(404), owner: 200 } },
  "POST /v1/personas/[id]/revisions/[version]/restore": {
    setup: ownerPersona,
    path: (f) => `/v1/personas/${f.extra.configId}/revisions/1/restore`,
    expect: { ...anyUser(404), owner: 200 },
  },
  // Agent chat: a session is its owner's alone; this one reads the fixture hub, which the owner's
  // hub-limited key does not reach (404, as for a non-member), and a read-only key reads but never sends.
  "GET /v1/chat/tools": { path: () => "/v1/chat/tools", expect: anyUser(200) },
  "GET /v1/chat/sessions": { path: () => "/v1/chat/sessions", expect: anyUser(200) },
  "POST /v1/chat/sessions": { path: () => "/v1/chat/sessions", body: () => ({ scope_type: "user_all_hubs" }), expect: { ...anyUser(201), hub_key: 403 } },
  "GET /v1/chat/sessions/[id]": { setup: ownerChat, path: chatPath(""), expect: { ...anyUser(404), owner: 200 } },
  "PATCH /v1/chat/sessions/[id]": { setup: ownerChat, path: chatPath(""), body: () => ({ title: "Renamed" }), expect: { ...anyUser(404), owner: 200 } },
  "DELETE /v1/chat/sessions/[id]": { setup: ownerChat, path: chatPath(""), expect: { ...anyUser(404), owner: 200 } },
  "GET /v1/chat/sessions/[id]/messages": { setup: ownerChatTurn, path: chatPath("/messages"), expect: { ...anyUser(404), owner: 200 } },
  "POST /v1/chat/sessions/[id]/messages": { setup: ownerChat, path: chatPath("/messages"), body: () => ({ content: "What is in the fixture hub?" }), expect: { ...anyUser(404), owner: 202 } },
  "GET /v1/chat/sessions/[id]/messages/[messageId]": { setup: ownerChatTurn, path: (f) => chatPath(`/messages/${f.extra.answerId}`)(f), expect: { ...anyUser(404), owner: 200 } },
  "GET /v1/chat/sessions/[id]/messages/[messageId]/stream": {
    setup: ownerChatTurn,
    path: (f) => chatPath(`/messages/${f.extra.answerId}/stream`)(f),
    expect: { ...anyUser(404), owner: 200 },
    contentType: "text/event-stream",
  },
  "POST /v1/chat/sessions/[id]/messages/[messageId]/cancel": { setup: ownerChatTurn, path: (f) => chatPath(`/messages/${f.extra.answerId}/cancel`)(f), expect: { ...anyUser(404), owner: 200 } },
  "POST /v1/chat/sessions/[id]/messages/[messageId]/regenerate": { setup: ownerChatTurn, path: (f) => chatPath(`/messages/${f.extra.answerId}/regenerate`)(f), expect: { ...anyUser(404), owner: 202 } },
  "POST /v1/chat/sessions/[id]/approvals/[approvalId]": {
    setup: ownerChatApproval,
    path: (f) => chatPath(`/approvals/${f.extra.approvalId}`)(f),
    body: () => ({ decision: "deny" }),
    expect: { ...anyUser(404), owner: 200 },
  },
  "GET /v1/configs/[id]/versions": { setup: ownerConfig, path: (f) => `/v1/configs/${f.extra.configId}/versions`, expect: { ...anyUser(404), owner: 200 } },
  "POST /v1/configs/sync": { path: () => "/v1/configs/sync", body: () => ({ device_id: "d", configs: [] }), expect: anyUser(200) },
  "POST /v1/configs/ack": { path: () => "/v1/configs/ack", body: () => ({ device_id: "d", configs: [] }), expect: anyUser(200) },
  "POST /v1/configs/local-delete": {
    setup: ownerConfig,
    path: () => "/v1/configs/local-delete",
    body: (f) => ({ device_id: "d", agent: "claude-code", file_path: f.extra.configPath, scope: "global" }),
    expect: { ...anyUser(404), owner: 200 },
  },
  "POST /v1/configs/batch-delete": { setup: ownerConfig, path: () => "/v1/configs/batch-delete", body: (f) => ({ ids: [f.extra.configId] }), expect: anyUser(200) },
  "GET /v1/configs/deleted": { path: () => "/v1/configs/deleted", expect: anyUser(200) },
  "POST /v1/configs/restore": {
    setup: ownerDeletedConfig,
    path: () => "/v1/configs/restore",
    body: (f) => ({ agent: "claude-code", file_path: f.extra.configPath, scope: "global" }),
    expect: { ...anyUser(404), owner: 200 },
  },
  "POST /v1/configs/merge": { path: () => "/v1/configs/merge", body: () => ({ local_content: "a", cloud_content: "b" }), expect: anyUser(200) },
  "GET /v1/agent-sessions": { path: () => "/v1/agent-sessions", expect: anyUser(200) },
  "PUT /v1/agent-sessions": { path: () => "/v1/agent-sessions", body: () => ({ agent: "codex", session_id: `s-${randomBytes(4).toString("hex")}`, content: "{}" }), expect: anyUser(201) },

  // Dreams (the fixture hub keeps allow_contributor_dreams off)
  "GET /v1/dreams": { path: (f) => `/v1/dreams?hub_id=${f.hubId}`, expect: hubRead(200) },
  "GET /v1/dreams/report": { path: () => "/v1/dreams/report", headers: inHub, expect: hubRead(200) },
  "POST /v1/dreams/trigger": { path: () => "/v1/dreams/trigger", headers: inHub, expect: hubManage(202) },
  "GET /v1/dreams/[id]": { setup: (f) => dreamAction(f, "archive"), path: (f) => `/v1/dreams/${f.extra.runId}`, expect: hubRead(200) },
  "GET /v1/dreams/[id]/actions": { setup: (f) => dreamAction(f, "archive"), path: (f) => `/v1/dreams/${f.extra.runId}/actions`, expect: hubRead(200) },
  "POST /v1/dreams/actions/[id]/undo": { setup: (f) => dreamAction(f, "archive"), path: (f) => `/v1/dreams/actions/${f.extra.actionId}/undo`, expect: hubManage(200) },
  "POST /v1/dreams/actions/[id]/resolve": {
    setup: (f) => dreamAction(f, "contradiction"),
    path: (f) => `/v1/dreams/actions/${f.extra.actionId}/resolve`,
    body: () => ({ resolution: "keep_both" }),
    expect: hubManage(200),
  },

  // Topics (the fixture hub keeps allow_contributor_topics off)
  "GET /v1/topics": { path: (f) => `/v1/topics?hub_id=${f.hubId}`, expect: hubRead(200) },
  "POST /v1/topics": { path: () => "/v1/topics", body: (f) => ({ name: `topic ${randomBytes(4).toString("hex")}`, hub_id: f.hubId }), expect: hubManage(201) },
  "GET /v1/topics/[id]": { setup: ownerTopic, path: (f) => `/v1/topics/${f.extra.topicId}`, expect: hubRead(200) },
  "PATCH /v1/topics/[id]": { setup: ownerTopic, path: (f) => `/v1/topics/${f.extra.topicId}`, body: () => ({ name: "Renamed" }), expect: hubManage(200) },
  "DELETE /v1/topics/[id]": { setup: ownerTopic, path: (f) => `/v1/topics/${f.extra.topicId}`, expect: hubManage(200) },
  "GET /v1/topics/archived": { path: (f) => `/v1/topics/archived?hub_id=${f.hubId}`, expect: hubRead(200) },
  "POST /v1/topics/reorder": {
    setup: ownerTopic,
    path: () => "/v1/topics/reorder",
    body: (f) => ({ operations: [{ topic_id: f.extra.topicId, position: 3 }] }),
    // A topic of a hub the caller cannot read is not found; the fallback hub (their personal one) has no such topic.
    expect: { ...hubManage(200), non_member: 404 },
  },
  "POST /v1/topics/[id]/archive": { setup: ownerTopic, path: (f) => `/v1/topics/${f.extra.topicId}/archive`, expect: hubManage(200) },
  "POST /v1/topics/[id]/visit": { setup: ownerTopic, path: (f) => `/v1/topics/${f.extra.topicId}/visit`, expect: hubRead(200) },
  "POST /v1/topics/[id]/restore": { setup: ownerTopic, path: (f) => `/v1/topics/${f.extra.topicId}/restore`, expect: hubManage(200) },
  "GET /v1/topics/[id]/memories": { setup: ownerTopic, path: (f) => `/v1/topics/${f.extra.topicId}/memories`, expect: hubRead(200) },
  // Filing someone else's memory is for managers; the fixture memory is the owner's.
  "POST /v1/topics/[id]/memories": {
    setup: ownerTopic,
    path: (f) => `/v1/topics/${f.extra.topicId}/memories`,
    body: (f) => ({ memory_id: f.secretMemoryId }),
    expect: hubManage(200),
  },
  "DELETE /v1/topics/[id]/memories/[memory_id]": {
    setup: ownerTopic,
    path: (f) => `/v1/topics/${f.extra.topicId}/memories/${f.secretMemoryId}`,
    expect: hubManage(200),
  },

  // Ask, events, notifications, account
  "POST /v1/ask": { path: () => "/v1/ask", body: () => ({ query: "classified content", no_rerank: true }), expect: anyUser(200) },
  // A 200 here is an event stream (tests/events.test.ts); an unknown type after the hub check keeps this row JSON.
  "GET /v1/events/stream": { path: (f) => `/v1/events/stream?hub_id=${f.hubId}&types=no.such.type`, expect: hubRead(400) },
  "GET /v1/notifications": { path: (f) => `/v1/notifications?hub=${f.hubId}`, expect: anyUser(200) },
  "GET /v1/notifications/summary": { path: (f) => `/v1/notifications/summary?hub=${f.hubId}`, expect: anyUser(200) },
  "POST /v1/notifications/seen": { path: () => "/v1/notifications/seen", body: () => ({ kinds: ["hub_member_joined"] }), expect: anyUser(200) },
  "POST /v1/notifications/dismiss": { path: () => "/v1/notifications/dismiss", body: () => ({ kinds: ["hub_member_joined"] }), expect: anyUser(200) },
  "POST /v1/notifications/[id]/seen": { setup: ownerNotification, path: (f) => `/v1/notifications/${f.extra.notificationId}/seen`, expect: { ...anyUser(404), owner: 200 } },
  "POST /v1/notifications/[id]/dismiss": {
    setup: ownerNotification,
    path: (f) => `/v1/notifications/${f.extra.notificationId}/dismiss`,
    expect: { ...anyUser(404), owner: 200 },
  },
  "POST /v1/notifications/[id]/resolve": {
    setup: ownerNotification,
    path: (f) => `/v1/notifications/${f.extra.notificationId}/resolve`,
    body: () => ({ action: "accept" }),
    // A receipt has no actions: the owner learns that; nobody else learns it exists.
    expect: { ...anyUser(404), owner: 400 },
  },
  // The owner's checklist: its items are the owner's alone (nobody else learns it exists). It is about
  // no hub, so the owner's hub-limited key reaches it, as it reaches every notification about no hub.
  "POST /v1/notifications/[id]/items/[item_id]/view": {
    setup: ownerChecklist,
    path: (f) => `/v1/notifications/${f.extra.checklistId}/items/first_recall/view`,
    expect: { ...anyUser(404), owner: 200, hub_key: 200 },
  },
  "POST /v1/notifications/[id]/items/[item_id]/complete": {
    setup: ownerChecklist,
    path: (f) => `/v1/notifications/${f.extra.checklistId}/items/first_recall/complete`,
    expect: { ...anyUser(404), owner: 200, hub_key: 200 },
  },
  "GET /v1/onboarding/state": { path: () => "/v1/onboarding/state", expect: anyUser(200) },
  "POST /v1/onboarding/restart": { setup: forgetChecklists, path: () => "/v1/onboarding/restart", body: () => ({}), expect: anyUser(201) },
  "GET /v1/settings": { path: () => "/v1/settings", expect: anyUser(200) },
  "PATCH /v1/settings": { path: () => "/v1/settings", body: () => ({ theme: "dark" }), expect: anyUser(200) },
  // The account's counters across every hub: not for a key limited to some hubs.
  "GET /v1/usage": { path: () => "/v1/usage", expect: { ...anyUser(200), hub_key: 403 } },
  "GET /v1/usage/dreams": { path: (f) => `/v1/usage/dreams?hub_id=${f.hubId}`, expect: hubRead(200) },
};

/** A connected app of the owner's, written straight to the database (tests/oauth.test.ts drives the real flow). */
async function ownerGrant(f: Fixture): Promise<string> {
  const clientId = `ec_${randomBytes(6).toString("hex")}`;
  await h.db.oAuthClient.create({ data: { id: clientId, name: "Matrix app", redirectUris: ["http://127.0.0.1/cb"], kind: "registered" } });
  const grant = await h.db.oAuthGrant.create({
    data: { id: newId(), userId: f.users.owner.id, clientId, hubIds: [], allHubs: true, scope: "read write", resource: "http://engram.test/mcp" },
  });
  return grant.id;
}

/** A receipt notification of the fixture hub's owner (the spare user joined). */
async function ownerNotification(f: Fixture) {
  await f.users.owner.post(`/v1/hubs/${f.hubId}/invites`, { email: f.users.spare.email, role: "viewer" });
  await f.users.admin.post(`/v1/hubs/${f.hubId}/members`, { user_id: f.users.spare.id, role: "viewer" });
  const list = await f.users.owner.get(`/v1/notifications?hub=${f.hubId}&kind=hub_member_joined`);
  f.extra.notificationId = list.body.data.notifications[0].id;
}

/** Every identity's run restarts the owner's checklist: forget earlier ones, or the 3-a-day limit answers. */
async function forgetChecklists() {
  await h.db.notification.deleteMany({ where: { sourceKind: "onboarding" } });
}

async function ownerChecklist(f: Fixture) {
  await forgetChecklists();
  const res = await f.users.owner.post("/v1/onboarding/restart", {});
  expect(res.status).toBe(201);
  f.extra.checklistId = res.body.data.id;
}

async function ownerTopic(f: Fixture) {
  const res = await f.users.owner.post("/v1/topics", { name: "Fixture topic", hub_id: f.hubId });
  expect(res.status).toBe(201);
  f.extra.topicId = res.body.data.id;
}

/** A file memory (a PNG) the owner uploaded into the fixture hub. */
async function ownerFile(f: Fixture) {
  const png = Buffer.from("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC", "base64");
  const owner = f.users.owner;
  const intent = await owner.post("/v1/uploads", { filename: "dot.png", content_type: "image/png", size_bytes: png.length }, { headers: inHub(f) });
  expect(intent.status).toBe(201);
  const put = await dispatch(new Request(intent.body.data.upload_url, { method: "PUT", headers: intent.body.data.headers, body: new Uint8Array(png) }));
  expect(put.status).toBe(200);
  const memory = await owner.post("/v1/memories", { file_ref: intent.body.data.file_ref }, { headers: inHub(f) });
  expect(memory.status).toBe(201);
  f.extra.fileMemoryId = memory.body.data.id;
  f.extra.attachmentId = (await h.db.attachment.findFirstOrThrow({ where: { memoryId: memory.body.data.id } })).id;
}

/** A config of the owner's (configs belong to a user, not a hub). */
async function ownerConfig(f: Fixture) {
  f.extra.configPath = `f-${randomBytes(4).toString("hex")}.md`;
  const res = await f.users.owner.put("/v1/configs", { agent: "claude-code", file_path: f.extra.configPath, scope: "global", content: "rules" });
  expect(res.status).toBe(201);
  f.extra.configId = res.body.data.id;
}

function chatPath(rest: string) {
  return (f: Fixture) => `/v1/chat/sessions/${f.extra.chatId}${rest}`;
}

/** A custom board on the fixture hub, made by its owner (its first card written before the row runs). */
async function ownerCustomBoard(f: Fixture) {
  const res = await f.users.owner.post(`/v1/hubs/${f.hubId}/boards`, { title: "Owner's board", instruction: "What is in this hub?" });
  expect(res.status).toBe(201);
  f.extra.boardId = res.body.data.board.id;
  await customBoardsIdle();
}

/** The owner's chat over the fixture hub. */
async function ownerChat(f: Fixture) {
  const res = await f.users.owner.post("/v1/chat/sessions", { scope_type: "single_hub", scope_hub_ids: [f.hubId] });
  expect(res.status).toBe(201);
  f.extra.chatId = res.body.data.id;
}

/** …with one finished turn, answered from the fixture hub's secret memory. */
async function ownerChatTurn(f: Fixture) {
  await ownerChat(f);
  const res = await f.users.owner.post(`/v1/chat/sessions/${f.extra.chatId}/messages`, { content: f.secretTitle });
  expect(res.status).toBe(202);
  f.extra.answerId = res.body.data.active_message_id;
  await chatTurnsIdle();
}

/** …with a turn waiting on the owner's approval to save a memory. */
async function ownerChatApproval(f: Fixture) {
  await ownerChat(f);
  const res = await f.users.owner.post(`/v1/chat/sessions/${f.extra.chatId}/messages`, { content: "Remember that the fixture hub has a secret." });
  expect(res.status).toBe(202);
  await chatTurnsIdle();
  const answer = await f.users.owner.get(`/v1/chat/sessions/${f.extra.chatId}/messages/${res.body.data.active_message_id}`);
  f.extra.approvalId = answer.body.data.tool_calls[0].approval_id;
  expect(f.extra.approvalId, answer.text).toEqual(expect.any(String));
}

async function ownerPersona(f: Fixture) {
  const res = await f.users.owner.put("/v1/configs", { agent: "openclaw", file_path: `agents/${randomBytes(4).toString("hex")}/SOUL.md`, scope: "global", content: "# Fixture persona\n" });
  expect(res.status).toBe(201);
  f.extra.configId = res.body.data.id;
}

async function ownerDeletedConfig(f: Fixture) {
  await ownerConfig(f);
  expect((await f.users.owner.delete(`/v1/configs/${f.extra.configId}`)).status).toBe(200);
}

/** A dream run of the fixture hub with one action on the secret memory. */
async function dreamAction(f: Fixture, type: "archive" | "contradiction") {
  const run = await f.users.owner.post("/v1/dreams/trigger", undefined, { headers: inHub(f) });
  expect(run.status).toBe(202);
  const runId: string = run.body.data.run_id;
  f.extra.runId = runId;
  const id = newId();
  if (type === "archive") await h.db.memory.update({ where: { id: f.secretMemoryId }, data: { state: "archived" } });
  await h.db.dreamAction.create({
    data: { id, runId, hubId: f.hubId, actionType: type, state: type === "archive" ? "applied" : "pending_review", sourceMemoryIds: type === "archive" ? [f.secretMemoryId] : [f.secretMemoryId, f.secretMemoryId], reason: "fixture" },
  });
  f.extra.actionId = id;
}

async function offerToAdmin(f: Fixture) {
  const res = await f.users.owner.post(`${hub(f)}/ownership-transfer`, { target_user_id: f.users.admin.id });
  expect(res.status).toBe(201);
  f.extra.transferId = res.body.data.id;
}

let h: Harness;
let users: Fixture["users"];
let limitedKeys: Record<(typeof KEY_IDENTITIES)[number], string>;
let foreign: { hubId: string; title: string; content: string };
/** anonymous and invalid_key cannot change anything, so they share one fixture. */
let shared: Fixture;
/** Every invite token the fixtures created (each with an e-mail, so each went through the outbox). */
const issuedTokens: string[] = [];
let blobDir: string;

beforeAll(async () => {
  // One owner builds a hub with three e-mailed invites per route: far past the hourly invitation cap.
  process.env.ENGRAM_INVITE_EMAILS_PER_HOUR = "1000000";
  blobDir = mkdtempSync(path.join(tmpdir(), "engram-security-blobs-"));
  setBlobStore(new LocalBlobStore(blobDir));
  h = await createHarness();
  users = {
    owner: await h.user("Owner"),
    admin: await h.user("Admin"),
    contributor: await h.user("Contributor"),
    viewer: await h.user("Viewer"),
    non_member: await h.user("Outsider"),
    spare: await h.user("Spare"),
  };
  // A hub nobody in the table belongs to: its data must never appear anywhere.
  const stranger = await h.user("Stranger");
  const other = await stranger.post("/v1/hubs", { name: `Foreign ${randomBytes(4).toString("hex")}` });
  const tag = randomBytes(6).toString("hex");
  foreign = { hubId: other.body.data.id, title: `Foreign title ${tag}`, content: `Foreign content ${tag}` };
  expect((await stranger.post("/v1/memories", { title: foreign.title, content: foreign.content }, { headers: { "x-hub-id": foreign.hubId } })).status).toBe(201);
  shared = await buildFixture();
  const hubKey = await users.owner.post("/v1/auth/api-keys", { name: "personal only", hub_id: users.owner.personalHubId });
  const readKey = await users.owner.post("/v1/auth/api-keys", { name: "read only", scopes: ["read"] });
  expect([hubKey.status, readKey.status]).toEqual([201, 201]);
  expect(hubKey.body.data).toMatchObject({ hub_scope_mode: "hub_allowlist", hub_ids: [users.owner.personalHubId] });
  limitedKeys = { hub_key: hubKey.body.data.key, read_key: readKey.body.data.key };
});
afterAll(async () => {
  delete process.env.ENGRAM_INVITE_EMAILS_PER_HOUR;
  await h?.close();
  setBlobStore(undefined);
  rmSync(blobDir, { recursive: true, force: true });
});

async function buildFixture(): Promise<Fixture> {
  const tag = randomBytes(6).toString("hex");
  const created = await users.owner.post("/v1/hubs", { name: `Secret hub ${tag}` });
  expect(created.status).toBe(201);
  const hubId = created.body.data.id;
  for (const role of ["admin", "contributor", "viewer"] as const) {
    expect((await addMemberByEmailInvite(users.owner, hubId, users[role], role)).status).toBe(201);
  }
  const secretTitle = `Secret title ${tag}`;
  const secretContent = `Classified content ${tag}`;
  const memory = await users.owner.post("/v1/memories", { title: secretTitle, content: secretContent }, { headers: { "x-hub-id": hubId } });
  expect(memory.status).toBe(201);
  const invite = await users.owner.post(`/v1/hubs/${hubId}/invites`, { role: "viewer", email: `guest-${tag}@example.test` });
  expect(invite.status).toBe(201);
  issuedTokens.push(invite.body.data.token);
  // Past the resend throttle, so resend answers on permissions alone.
  await h.db.invite.update({ where: { id: invite.body.data.id }, data: { lastSentAt: new Date(Date.now() - 120_000) } });
  return {
    hubId,
    hubName: created.body.data.name,
    hubSlug: created.body.data.slug,
    secretTitle,
    secretContent,
    secretMemoryId: memory.body.data.id,
    inviteId: invite.body.data.id,
    inviteToken: invite.body.data.token,
    users,
    extra: {},
  };
}

function clientOf(identity: Identity): Client | ReturnType<typeof clientFor> {
  if (identity === "anonymous") return h.anonymous;
  if (identity === "invalid_key") return clientFor(`egk_${randomBytes(32).toString("base64url")}`);
  if (identity === "hub_key" || identity === "read_key") return clientFor(limitedKeys[identity]);
  return users[identity];
}

function userOf(identity: Identity): Client | undefined {
  if (identity === "anonymous" || identity === "invalid_key") return undefined;
  if (identity === "hub_key" || identity === "read_key") return users.owner;
  return users[identity];
}

async function send(method: string, row: Row, f: Fixture, identity: Identity): Promise<ApiResponse> {
  const client = clientOf(identity);
  const me = userOf(identity);
  const options = { headers: row.headers?.(f) ?? {} };
  const path = row.path(f);
  const body = row.body?.(f, me);
  switch (method) {
    case "GET":
      return client.get(path, options);
    case "POST":
      return client.post(path, body, options);
    case "PUT":
      return client.put(path, body, options);
    case "PATCH":
      return client.patch(path, body, options);
    default:
      return client.delete(path, options);
  }
}

const METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE"] as const;

/** Methods each route file really implements: the methodsNotAllowed ones answer 405 method_not_allowed. */
async function discoverRoutes() {
  const implemented: string[] = [];
  const refused: { key: string; pattern: string; method: string }[] = [];
  for (const route of listRouteFiles()) {
    const mod = (await import(route.file)) as Record<string, unknown>;
    for (const method of METHODS) {
      const handler = mod[method] as ((req: Request, ctx: { params: Promise<Record<string, string>> }) => Promise<Response>) | undefined;
      if (!handler) continue;
      const res = await handler(new Request(`http://engram.test${route.pattern}`, { method }), { params: Promise.resolve({}) });
      const body = (await res.json().catch(() => undefined)) as { error?: { code?: string } } | undefined;
      const key = `${method} ${route.pattern}`;
      if (res.status === 405 && body?.error?.code === "method_not_allowed") refused.push({ key, pattern: route.pattern, method });
      else implemented.push(key);
    }
  }
  return { implemented, refused };
}

describe("route table", () => {
  it("has exactly one row per implemented /v1 route and method", async () => {
    const { implemented } = await discoverRoutes();
    const covered = new Set(Object.keys(ROUTES).map(routeOf));
    const missing = implemented.filter((key) => !covered.has(key));
    const stale = Object.keys(ROUTES).filter((key) => !implemented.includes(routeOf(key)));
    expect(missing, "add these to ROUTES in tests/security.test.ts").toEqual([]);
    expect(stale, "these rows name no implemented route").toEqual([]);
  });

  it("answers JSON 405 with Allow for every method a route does not implement", async () => {
    const { refused } = await discoverRoutes();
    expect(refused.length).toBeGreaterThan(20);
    for (const { pattern, method } of refused) {
      const path = pattern.replace(/\[\.\.\.\w+\]/g, "x").replace(/\[\w+\]/g, "00000000-0000-7000-8000-000000000000");
      const res = await send(method, { path: () => path, body: () => ({}), expect: publicRoute(405) }, shared, "owner");
      expect(res.status, `${method} ${pattern}`).toBe(405);
      expect(res.body.error.code).toBe("method_not_allowed");
      expect(res.headers.get("allow")).toBeTruthy();
    }
  });
});

describe.each(Object.entries(ROUTES))("%s", (key, row) => {
  const method = key.split(" ")[0]!;
  it.each(IDENTITIES)("as %s", async (identity) => {
    const f = identity === "anonymous" || identity === "invalid_key" ? shared : await buildFixture();
    // Unauthenticated calls never reach the resource, so they need no per-row setup.
    if (row.setup && f !== shared) await row.setup(f);
    const res = await send(method, row, f, identity);
    expect(res.status, `${key} as ${identity}: ${res.text.slice(0, 300)}`).toBe(expectedStatus(key, row, identity));
    const type = res.status < 300 && row.contentType ? row.contentType : "application/json";
    expect(res.headers.get("content-type") ?? "", `${key} answers ${type}`).toContain(type);
    if (res.status >= 400) expect(typeof res.body?.error?.code).toBe("string");

    const text = res.text;
    for (const secret of [foreign.hubId, foreign.title, foreign.content]) expect(text, `${key} as ${identity} leaks another hub`).not.toContain(secret);
    expect(text, `${key} as ${identity} shows a stored invite token`).not.toContain(f.inviteToken);
    const outsider = identity === "anonymous" || identity === "invalid_key" || identity === "non_member" || identity === "hub_key";
    // A key limited to other hubs sees what a non-member would.
    const revealed = row.reveals?.includes(identity === "hub_key" ? "non_member" : identity);
    if (outsider && !revealed) {
      for (const secret of [f.hubId, f.hubName, f.hubSlug, f.secretTitle, f.secretContent]) {
        expect(text, `${key} as ${identity} leaks the hub`).not.toContain(secret);
      }
    }
    for (const hidden of row.hides?.[identity]?.(f) ?? []) expect(text, `${key} as ${identity} shows ${hidden}`).not.toContain(hidden);
  });
});

// Issue 18: cases that are not one route × one identity. Each has its own focused test file too
// (client-address, sign-in-throttle, security-races, quotas, invites); these rows keep them in the matrix.
describe("hardening cases", () => {
  it.each([
    ["GET", "/v1/health"],
    ["POST", "/v1/admin/users"],
    ["GET", "/v1/invites/egi_not-a-real-token"],
  ])("%s %s: rotating X-Forwarded-For does not buy a fresh per-IP budget", async (method, path) => {
    setRateLimiter(frozenLimiter({ regular: 1, heavy: 1, light: 1 }));
    try {
      const from = (xff: string) => ({ headers: { [SOCKET_ADDRESS_HEADER]: "198.51.100.99", "x-forwarded-for": xff } });
      const call = (xff: string) => (method === "GET" ? h.anonymous.get(path, from(xff)) : h.anonymous.post(path, {}, from(xff)));
      expect((await call("203.0.113.1")).status).not.toBe(429);
      expect((await call("203.0.113.2")).status).toBe(429);
    } finally {
      setRateLimiter(new MemoryRateLimiter({ ...HARNESS_LIMITS }));
    }
  });

  it("no invite token the fixtures issued is readable in mail_outbox", async () => {
    expect(issuedTokens.length).toBeGreaterThan(0);
    const bodies = (await h.db.mailOutbox.findMany({ select: { body: true } })).map((m) => m.body).join("\n");
    expect(bodies).toContain("[redacted]");
    for (const token of issuedTokens) expect(bodies).not.toContain(token);
  });

  it.each(IDENTITIES)("POST /v1/memories past the hub's memory quota as %s", async (identity) => {
    const f = await buildFixture();
    const row: Row = { path: () => "/v1/memories", headers: inHub, body: () => ({ content: `over ${randomBytes(4).toString("hex")}` }), expect: hubWrite(413) };
    process.env.ENGRAM_QUOTA_HUB_MEMORIES = String(await h.db.memory.count({ where: { hubId: f.hubId } }));
    try {
      const res = await send("POST", row, f, identity);
      expect(res.status).toBe(expectedStatus("POST /v1/memories", row, identity));
      if (res.status === 413) expect(res.body.error).toMatchObject({ code: "quota_exceeded", details: { scope: "hub", resource: "memories" } });
    } finally {
      delete process.env.ENGRAM_QUOTA_HUB_MEMORIES;
    }
  });
});

// Every fixture is a new hub for the same six users: drop them as we go, or the hubs-per-user cap (100) fills up.
afterEach(async () => {
  await h.db.hub.deleteMany({ where: { hubType: "team", id: { notIn: [shared.hubId, foreign.hubId] } } });
});
