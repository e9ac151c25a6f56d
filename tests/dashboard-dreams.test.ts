import { parseHTML } from "linkedom";
import { act, createElement } from "react";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { newId } from "@/lib/ids.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { dispatch } from "./support/router.ts";

/**
 * The dashboard's Dreams tab (components/hub-dreams.tsx), rendered by React into a linkedom document;
 * its requests go to the real route handlers with the user's key, as the browser's go with its session.
 */
let h: Harness;
let ann: Client;
let document: Document;
let window: Window & typeof globalThis;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  ({ window, document } = parseHTML("<!doctype html><html><body><div id=root></div></body></html>") as unknown as { window: Window & typeof globalThis; document: Document });
  Object.assign(window, { location: new URL("http://engram.test/hubs/x/dreams") });
  Object.assign(globalThis, { window, document, navigator: window.navigator, IS_REACT_ACT_ENVIRONMENT: true });
  vi.stubGlobal("fetch", (input: string, init: RequestInit = {}) =>
    dispatch(new Request(new URL(input, "http://engram.test"), { ...init, headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${ann.key}` } })),
  );
});
afterAll(async () => {
  vi.unstubAllGlobals();
  await h?.close();
});

async function settle() {
  for (let i = 0; i < 20; i++) await act(() => new Promise((resolve) => setTimeout(resolve, 10)));
}

/** Settles until `done` holds: a loaded machine (PostgreSQL, other test files) answers later than settle() waits. */
async function settleUntil(done: () => Promise<boolean> | boolean) {
  for (let waited = 0; !(await done()); waited += 200) {
    expect(waited).toBeLessThan(20_000);
    await settle();
  }
}

const rows = () => [...document.querySelectorAll("li")];
const button = (label: string) => [...document.querySelectorAll("button")].find((b) => b.textContent?.trim() === label);
const click = (element: Element) => act(async () => void element.dispatchEvent(new window.Event("click", { bubbles: true })));

describe("a dream run's Actions card", () => {
  /** It listed the run's first 100 actions and said the rest were in the API: the person could not reach (nor undo) them. */
  it("reaches every action of a run past the first page (100), each with its undo", async () => {
    const hubId = ann.personalHubId;
    const runId = newId();
    const start = Date.now() - 60_000;
    await h.db.dreamRun.create({ data: { id: runId, hubId, status: "completed", phase: "done", createdAt: new Date(start), startedAt: new Date(start), finishedAt: new Date() } });
    const memory = await ann.post("/v1/memories", { content: "Stale note about the old office." });
    expect(memory.status, memory.text).toBe(201);
    const memoryId = memory.body.data.id as string;
    const actions = Array.from({ length: 150 }, (_, i) => ({
      id: newId(),
      runId,
      hubId,
      actionType: "archive",
      state: "applied",
      sourceMemoryIds: [i === 149 ? memoryId : newId()],
      reason: `Action ${String(i).padStart(3, "0")}`,
      createdAt: new Date(start + i),
    }));
    await h.db.dreamAction.createMany({ data: actions });
    await h.db.memory.update({ where: { id: memoryId }, data: { state: "archived" } });
    const archivedAt = (await h.db.memory.findUniqueOrThrow({ where: { id: memoryId } })).updatedAt;
    await h.db.dreamAction.update({ where: { id: actions[149]!.id }, data: { details: { archived_updated_at: archivedAt.toISOString() } } });

    const { RunReport } = await import("@/components/hub-dreams.tsx");
    const { createRoot } = await import("react-dom/client");
    const root = createRoot(document.getElementById("root")!);
    const run = { id: runId, status: "completed", started_at: new Date(start).toISOString(), memories_scanned: 150, duplicates_merged: 0, contradictions_found: 0, memories_archived: 150, memories_organized: 0, report: "", error: null };
    await act(async () => root.render(createElement(RunReport, { run, canAct: true })));
    await settleUntil(() => rows().length > 0);
    expect(rows()).toHaveLength(100);
    expect(rows().some((row) => row.textContent?.includes("Action 149"))).toBe(false);

    const more = button("Show more actions");
    expect(more, "a way to the actions past the first page").toBeDefined();
    await click(more!);
    await settleUntil(() => rows().length > 100);
    expect(rows()).toHaveLength(150);
    expect(new Set(rows().map((row) => row.textContent)).size).toBe(150);
    expect(button("Show more actions")).toBeUndefined();

    // The last action, shown on the second page only, is undone from there.
    const last = rows().find((row) => row.textContent?.includes("Action 149"))!;
    await click([...last.querySelectorAll("button")].find((b) => b.textContent?.includes("Undo"))!);
    await settleUntil(async () => rows().find((row) => row.textContent?.includes("Action 149"))!.textContent!.includes("undone"));
    expect((await h.db.dreamAction.findUniqueOrThrow({ where: { id: actions[149]!.id } })).state).toBe("undone");
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: memoryId } })).state).toBe("active");
    expect(rows().find((row) => row.textContent?.includes("Action 149"))!.textContent).toContain("undone");
    await act(async () => root.unmount());
  });
});

describe("the Dreams tab's list of runs", () => {
  /** It listed the hub's 20 newest runs, with no way to an older run's report and actions (a month of daily runs is 30). */
  it("reaches every run past the first page (20)", async () => {
    const hubId = await h.teamHub(ann);
    const start = Date.now() - 3_600_000;
    const runs = Array.from({ length: 45 }, (_, i) => ({ id: newId(), hubId, status: "completed", phase: "done", report: `Report of run ${String(i).padStart(2, "0")}`, createdAt: new Date(start + i * 1000), startedAt: new Date(start + i * 1000), finishedAt: new Date(start + i * 1000 + 500) }));
    await h.db.dreamRun.createMany({ data: runs });

    const listed = () => [...document.querySelectorAll('nav[aria-label="Dream runs"] button[type="button"]')].filter((b) => b.querySelector("span"));
    const { DreamRuns } = await import("@/components/hub-dreams.tsx");
    const { createRoot } = await import("react-dom/client");
    const root = createRoot(document.getElementById("root")!);
    await act(async () => root.render(createElement(DreamRuns, { hubId, canAct: true })));
    await settleUntil(() => listed().length > 0);
    expect(listed()).toHaveLength(20);

    for (let page = 1; page <= 2; page++) {
      const more = button("Show older runs");
      expect(more, "a way to the runs past the first page").toBeDefined();
      await click(more!);
      await settle();
      await settleUntil(() => listed().length > page * 20);
    }
    expect(listed()).toHaveLength(45);
    expect(button("Show older runs")).toBeUndefined();
    // The oldest run, on the last page only, opens with its report.
    await click(listed().at(-1)!);
    await settleUntil(() => document.body.textContent!.includes("Report of run 00"));
    await act(async () => root.unmount());
  });
});

describe("a review closed because one of its memories left the hub", () => {
  /** A review closed as memory_moved offered "Reopen", which the API always refuses (409): only memory_deleted hid it. */
  it("offers no Reopen, as one closed by a delete does", async () => {
    const hubId = await h.teamHub(ann);
    const runId = newId();
    await h.db.dreamRun.create({ data: { id: runId, hubId, status: "completed", phase: "done", finishedAt: new Date() } });
    const closed = (resolution: string, i: number) => ({
      id: newId(),
      runId,
      hubId,
      actionType: "contradiction",
      state: "resolved",
      resolution,
      sourceMemoryIds: [newId(), newId()],
      reason: `Review closed as ${resolution}`,
      createdAt: new Date(Date.now() - 1000 + i),
    });
    await h.db.dreamAction.createMany({ data: [closed("memory_deleted", 0), closed("memory_moved", 1), closed("kept_both", 2)] });
    const { RunReport } = await import("@/components/hub-dreams.tsx");
    const { createRoot } = await import("react-dom/client");
    const root = createRoot(document.getElementById("root")!);
    const run = { id: runId, status: "completed", started_at: new Date().toISOString(), memories_scanned: 2, duplicates_merged: 0, contradictions_found: 3, memories_archived: 0, memories_organized: 0, report: "", error: null };
    await act(async () => root.render(createElement(RunReport, { run, canAct: true })));
    await settleUntil(() => rows().length === 3);
    const buttonsOf = (text: string) => [...rows().find((row) => row.textContent?.includes(text))!.querySelectorAll("button")].map((b) => b.textContent?.trim());
    expect(buttonsOf("memory_deleted")).toEqual([]);
    expect(buttonsOf("memory_moved")).toEqual([]);
    expect(buttonsOf("kept_both")).toEqual(["Reopen"]);
    await act(async () => root.unmount());
  });
});

describe("a review whose side to archive was edited after it was flagged", () => {
  /** Keep A / Keep B got a 409 (the side edited since; resolve again with its version) and the tab had no way to send the version. */
  it("offers to read that side as it is now and to archive it anyway, which resolves the review", async () => {
    const hubId = await h.teamHub(ann);
    const push = async (content: string) => (await ann.post("/v1/memories", { content }, { headers: { "x-hub-id": hubId } })).body.data.id as string;
    const a = await push("The staging deploy timeout is 30 seconds.");
    const b = await push("The staging deploy timeout is 60 seconds.");
    const runId = newId();
    await h.db.dreamRun.create({ data: { id: runId, hubId, status: "completed", phase: "done", finishedAt: new Date() } });
    await h.db.dreamAction.create({
      data: {
        id: newId(),
        runId,
        hubId,
        actionType: "contradiction",
        state: "pending_review",
        sourceMemoryIds: [a, b],
        reason: "The two notes disagree on the staging deploy timeout",
        details: { a: { id: a, title: "Timeout 30", excerpt: "30 seconds" }, b: { id: b, title: "Timeout 60", excerpt: "60 seconds" } },
        createdAt: new Date(Date.now() - 60_000),
      },
    });
    expect((await ann.patch(`/v1/memories/${b}`, { content: "The staging deploy timeout is 60 seconds since the runner moved." })).status).toBe(200);
    const { RunReport } = await import("@/components/hub-dreams.tsx");
    const { createRoot } = await import("react-dom/client");
    const root = createRoot(document.getElementById("root")!);
    const run = { id: runId, status: "completed", started_at: new Date().toISOString(), memories_scanned: 2, duplicates_merged: 0, contradictions_found: 1, memories_archived: 0, memories_organized: 0, report: "", error: null };
    await act(async () => root.render(createElement(RunReport, { run, canAct: true })));
    await settleUntil(() => button("Keep A") !== undefined);
    await click(button("Keep A")!);
    await settleUntil(() => button("Archive it anyway") !== undefined);
    expect((await h.db.memory.findUniqueOrThrow({ where: { id: b } })).state).toBe("active");
    expect([...document.querySelectorAll("a")].some((link) => link.getAttribute("href") === `/memories/${b}`)).toBe(true);
    await click(button("Archive it anyway")!);
    await settleUntil(async () => (await h.db.memory.findUniqueOrThrow({ where: { id: b } })).state === "archived");
    await settleUntil(() => button("Reopen") !== undefined);
    await act(async () => root.unmount());
  });
});
