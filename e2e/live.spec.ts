import { expect, test, type Page } from "@playwright/test";
import path from "node:path";
import { apiAs, newPage, signUp } from "./support.ts";

const ARTIFACTS = path.resolve(import.meta.dirname, "artifacts");
const stamp = Date.now();
const ann = { name: "Ann Live", email: `ann-live-${stamp}@example.test`, password: "ann-password-1" };
const bob = { name: "Bob Live", email: `bob-live-${stamp}@example.test`, password: "bob-password-1" };

/** Waits until the page's event stream is open: a stream delivers only events newer than its start. */
async function liveStream(page: Page): Promise<void> {
  await expect(page.locator("html[data-live=connected]")).toHaveCount(1, { timeout: 15_000 });
}

test("live: a memory pushed by another member appears without a reload; the bell counts an invite; ask streams a cited answer", async ({ browser }) => {
  const a = await newPage(browser);
  const b = await newPage(browser);
  await signUp(a, ann);
  await signUp(b, bob);
  const created = await apiAs(a, "POST", "/v1/hubs", { name: `Live hub ${stamp}` });
  const hubId: string = created.hub?.id ?? created.id;
  // Bob joins through an invite link (no e-mail, so his bell starts at zero for the step below).
  const invite = await apiAs(a, "POST", `/v1/hubs/${hubId}/invites`, { role: "contributor" });
  await apiAs(b, "POST", `/v1/invites/${invite.invite?.token ?? invite.token}/accept`);

  await test.step("Ann watches the hub; Bob pushes; the row appears without navigation", async () => {
    await a.goto(`/hubs/${hubId}`);
    await expect(a.getByRole("heading", { name: "Memories" })).toBeVisible();
    const navigations: string[] = [];
    a.on("framenavigated", (frame) => {
      if (frame === a.mainFrame()) navigations.push(frame.url());
    });
    await liveStream(a);
    const title = `Deploy checklist from Bob ${stamp}`;
    await apiAs(b, "POST", "/v1/memories", { content: `# ${title}\n\nRun the database migrations before restarting the api pods.` }, hubId);
    await expect(a.getByTestId("memory-row").filter({ hasText: title })).toBeVisible({ timeout: 10_000 });
    expect(navigations).toEqual([]);
    await a.screenshot({ path: path.join(ARTIFACTS, "live-01-pushed-by-bob.png"), fullPage: true });
  });

  await test.step("Bob's bell counts Ann's invite live, and he can accept it from the panel", async () => {
    await b.goto("/hubs");
    await expect(b.getByRole("button", { name: /^Notifications/ })).toBeVisible();
    await liveStream(b);
    const second = await apiAs(a, "POST", "/v1/hubs", { name: `Second hub ${stamp}` });
    // Addressed to Bob's account: an e-mailed invite reaches an account in-app only once it has proven
    // the address (a password sign-up has not), so the bell would stay at zero for it.
    const me = await apiAs(b, "GET", "/v1/auth/me");
    await apiAs(a, "POST", `/v1/hubs/${second.hub?.id ?? second.id}/invites`, { role: "viewer", invitee: { user_id: me.user.id } });
    await expect(b.getByTestId("notification-count")).toHaveText("1", { timeout: 10_000 });
    await b.getByRole("button", { name: /^Notifications/ }).click();
    await expect(b.getByRole("dialog", { name: "Notifications" })).toContainText("invited you");
    await b.getByRole("button", { name: "Accept" }).click();
    await expect(b.getByRole("dialog", { name: "Notifications" })).toContainText("Nothing new.");
    await expect(b.getByTestId("notification-count")).toHaveCount(0);
  });

  await test.step("Ann asks; the answer streams in with a citation linking to the memory", async () => {
    await a.getByLabel("Your question").fill("what do we run before restarting the api pods?");
    await a.getByRole("button", { name: "Ask", exact: true }).click();
    const answer = a.getByTestId("ask-answer");
    await expect(answer).toContainText("migrations", { timeout: 20_000 });
    await expect(a.getByText("extractive")).toBeVisible();
    const citation = answer.getByRole("link", { name: "[1]" });
    await expect(citation).toBeVisible();
    await a.screenshot({ path: path.join(ARTIFACTS, "live-02-ask.png"), fullPage: true });
    await citation.click();
    await expect(a).toHaveURL(/\/memories\//);
  });
});

test("live: an agent's decision gate rings the bell, and choosing an option there writes the decision as a memory", async ({ browser }) => {
  const cat = { name: "Cat Live", email: `cat-live-${stamp}@example.test`, password: "cat-password-1" };
  const page = await newPage(browser);
  await signUp(page, cat);
  const me = await apiAs(page, "GET", "/v1/auth/me");
  await expect(page.getByRole("button", { name: /^Notifications/ })).toBeVisible();
  await liveStream(page);
  // What Memax's memax_request_decision sends (here through the session; an agent sends its key).
  const { slot } = await apiAs(page, "POST", `/v1/hubs/${me.personal_hub_id}/board/decision-gate`, {
    question: "Which database for the billing service?",
    options: ["PostgreSQL", "SQLite"],
    context: "Billing needs transactions across accounts.",
    source_agent: "claude-code",
  });
  await expect(page.getByTestId("notification-count")).toHaveText("1", { timeout: 10_000 });
  await page.getByRole("button", { name: /^Notifications/ }).click();
  const panel = page.getByRole("dialog", { name: "Notifications" });
  await expect(panel).toContainText("claude-code asks in");
  await expect(panel).toContainText("Which database for the billing service?");
  await expect(panel).toContainText("Billing needs transactions across accounts.");
  await page.screenshot({ path: path.join(ARTIFACTS, "live-03-decision-gate.png"), fullPage: true });
  await panel.getByRole("button", { name: "PostgreSQL" }).click();
  await expect(panel).toContainText("Nothing new.");
  const board = await apiAs(page, "GET", `/v1/hubs/${me.personal_hub_id}/board`);
  const answered = board.slots.find((s: { id: string }) => s.id === slot.id);
  expect(answered).toMatchObject({ state: "resolved", payload: { chosen: { label: "PostgreSQL" } } });
  const memory = await apiAs(page, "GET", `/v1/memories/${answered.cite_memory_ids[0]}`);
  expect(memory.content).toContain("Chosen: **PostgreSQL**");

  // The getting-started checklist from the bell: the decision's memory already ticked the first step.
  await panel.getByRole("button", { name: "Getting started checklist" }).click();
  const steps = panel.getByRole("list", { name: "Get started with Engram" });
  await expect(steps).toContainText("Save your first memory");
  await expect(panel.getByRole("button", { name: "Mark “Save your first memory” done" })).toHaveCount(0);
  await expect(panel.getByRole("button", { name: "Mark “Save five memories” done" })).toBeEnabled();
  await panel.getByRole("button", { name: "Mark “Invite a teammate” done" }).click();
  await expect(panel.getByRole("button", { name: "Mark “Invite a teammate” done" })).toHaveCount(0);
  await page.screenshot({ path: path.join(ARTIFACTS, "live-04-checklist.png"), fullPage: true });
  await panel.getByRole("button", { name: "Dismiss" }).click();
  await expect(panel).toContainText("Nothing new.");
  expect(await apiAs(page, "GET", "/v1/onboarding/state")).toEqual({ has_prior: true, current_version: 1, current_status: "resolved" });
});
