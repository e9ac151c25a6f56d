import { expect, test, type Browser, type Page } from "@playwright/test";
import { writeFileSync } from "node:fs";
import { cpus } from "node:os";
import path from "node:path";

const ARTIFACTS = path.resolve(import.meta.dirname, "artifacts");
const base = () => {
  const url = process.env.E2E_BASE_URL;
  if (!url) throw new Error("E2E_BASE_URL is set by e2e/global-setup.ts");
  return url;
};
const stamp = Date.now();
const ann = { name: "Ann Owner", email: `ann-${stamp}@example.test`, password: "ann-password-1" };
const bob = { name: "Bob Joiner", email: `bob-${stamp}@example.test`, password: "bob-password-1" };

async function shot(page: Page, name: string) {
  await page.screenshot({ path: path.join(ARTIFACTS, `${name}.png`), fullPage: true });
}

/** Cumulative layout shift, summed by the browser's own layout-shift entries. */
async function trackLayoutShift(page: Page) {
  await page.addInitScript(() => {
    (window as unknown as { __cls: number }).__cls = 0;
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries() as (PerformanceEntry & { value: number; hadRecentInput: boolean })[]) {
        if (!entry.hadRecentInput) (window as unknown as { __cls: number }).__cls += entry.value;
      }
    }).observe({ type: "layout-shift", buffered: true });
  });
}

async function newPage(browser: Browser, viewport = { width: 1280, height: 900 }) {
  const context = await browser.newContext({ viewport, baseURL: base() });
  return context.newPage();
}

async function signUp(page: Page, who: { name: string; email: string; password: string }) {
  await page.getByLabel("Name").fill(who.name);
  await page.getByLabel("Email").fill(who.email);
  await page.getByLabel("Password").fill(who.password);
  await page.getByRole("button", { name: "Create account" }).click();
}

test("sign up → hub → push → recall → invite → join → role change → ownership transfer", async ({ browser }) => {
  const figures: Record<string, unknown> = {};
  const a = await newPage(browser);
  await trackLayoutShift(a);

  await test.step("Ann is sent to sign-in, then signs up", async () => {
    await a.goto("/hubs");
    await expect(a).toHaveURL(/\/sign-in\?callbackUrl=%2Fhubs/);
    await shot(a, "01-sign-in");
    await a.getByRole("link", { name: "Create an account" }).click();
    await expect(a.getByRole("heading", { name: "Create your account" })).toBeVisible();
    await signUp(a, ann);
    await expect(a).toHaveURL(/\/hubs$/);
    await expect(a.getByRole("link", { name: /Personal/ })).toBeVisible();
  });

  let hubUrl = "";
  await test.step("Ann creates a team hub", async () => {
    await a.getByLabel("Hub name").fill("Platform team");
    await a.getByRole("button", { name: "Create hub" }).click();
    await expect(a).toHaveURL(/\/hubs\/[0-9a-f-]{36}$/);
    hubUrl = new URL(a.url()).pathname;
    await expect(a.getByRole("heading", { level: 1, name: "Platform team" })).toBeVisible();
    await expect(a.getByText("No memories yet")).toBeVisible();
  });

  await test.step("Ann pushes a markdown memory and sees it processed", async () => {
    await a.getByRole("button", { name: "Push a memory" }).click();
    await a.getByLabel("Tags (optional)").fill("ops, deploy");
    await a.getByLabel("Content (markdown)").fill(
      "# Deploy runbook\n\nRun the database migrations before switching traffic to the new release.\n\n## Rollback\n\nPoint the load balancer back at the blue environment.\n\n<script>alert(1)</script>",
    );
    await a.getByRole("tab", { name: "Preview" }).click();
    await expect(a.locator(".prose-memory h2", { hasText: "Deploy runbook" })).toBeVisible();
    await a.getByRole("button", { name: "Push memory" }).click();
    const row = a.getByTestId("memory-row").filter({ hasText: "Deploy runbook" });
    await expect(row).toBeVisible();
    // Background processing (classify, chunk, embed, summarise) finishes and the row updates by itself.
    await expect(row.getByText("ready")).toBeVisible({ timeout: 60_000 });
    await shot(a, "02-hub-memories");
  });

  await test.step("Ann finds it by recall", async () => {
    await a.getByLabel("What do you want to recall?").fill("database migrations before switching traffic");
    await a.getByRole("button", { name: "Recall", exact: true }).click();
    const result = a.locator("ol li").filter({ hasText: "Deploy runbook" });
    await expect(result).toBeVisible();
    await expect(result.getByTitle("Relevance score (0 to 1)")).toHaveText(/^(0\.\d\d|1\.00)$/);
    await shot(a, "03-recall");
  });

  await test.step("the memory page renders sanitised markdown", async () => {
    await a.getByTestId("memory-row").filter({ hasText: "Deploy runbook" }).getByRole("link").click();
    await expect(a.getByRole("heading", { level: 1, name: "Deploy runbook" })).toBeVisible();
    await expect(a.locator(".prose-memory h3", { hasText: "Rollback" })).toBeVisible();
    expect(await a.locator(".prose-memory script").count()).toBe(0);
    await expect(a.getByText("#ops #deploy")).toBeVisible();
    await shot(a, "04-memory");
    await a.getByRole("link", { name: "← Platform team" }).click();
  });

  await test.step("Ann drops a file into the hub; it is read, and the original downloads unchanged", async () => {
    const bytes = Buffer.from("# Release checklist\n\nFreeze the branch, tag the release candidate and notify support before the rollout.\n");
    await a.getByLabel("Choose files to upload").setInputFiles({ name: "release-checklist.md", mimeType: "text/markdown", buffer: bytes });
    await expect(a.getByText("uploaded — reading its text…")).toBeVisible();
    const row = a.getByTestId("memory-row").filter({ hasText: "release-checklist.md" });
    await expect(row.getByText("ready")).toBeVisible({ timeout: 60_000 });
    await row.getByRole("link").click();
    await expect(a.getByRole("heading", { level: 1, name: "release-checklist.md" })).toBeVisible();
    await expect(a.getByText("tag the release candidate").first()).toBeVisible();
    const download = a.getByRole("link", { name: "Download release-checklist.md" });
    const response = await a.request.get((await download.getAttribute("href"))!);
    expect(response.status()).toBe(200);
    expect(Buffer.from(await response.body()).equals(bytes)).toBe(true);
    await shot(a, "04b-file-memory");
    await a.getByRole("link", { name: "← Platform team" }).click();
  });

  let inviteLink = "";
  await test.step("Ann invites a contributor and copies the link", async () => {
    await a.goto(`${hubUrl}/members`);
    await a.getByRole("button", { name: "Create invite" }).click();
    const link = a.getByTestId("invite-link");
    await expect(link).toBeVisible();
    inviteLink = await link.inputValue();
    expect(inviteLink).toMatch(/\/invite\/egi_/);
    await shot(a, "05-members-invite");
  });

  await test.step("an invite by e-mail shows in the hub's mail outbox (no SMTP here: logged)", async () => {
    await a.getByLabel("Email (optional)").fill("carol@example.test");
    await a.getByRole("button", { name: "Create invite" }).click();
    await expect(a.getByText("carol@example.test").first()).toBeVisible();
    // No Refresh click: the outbox reloads after an invite action.
    const outbox = a.getByTestId("mail-outbox");
    await expect(outbox.getByText("carol@example.test")).toBeVisible();
    await expect(outbox.getByText("logged")).toBeVisible();
  });

  const b = await newPage(browser, { width: 390, height: 844 });
  await test.step("Bob opens the invite on a phone, signs up and joins", async () => {
    await b.goto(new URL(inviteLink).pathname);
    await expect(b.getByRole("heading", { name: "Platform team" })).toBeVisible();
    await expect(b.getByText(`${ann.name} invited you to join`)).toBeVisible();
    await expect(b.getByText("contributor")).toBeVisible();
    await shot(b, "06-invite-phone");
    await b.getByRole("link", { name: "Create an account" }).click();
    await signUp(b, bob);
    await expect(b).toHaveURL(/\/invite\/egi_/);
    await b.getByRole("button", { name: /Join Platform team/ }).click();
    await expect(b).toHaveURL(new RegExp(`${hubUrl}$`));
    await expect(b.getByTestId("memory-row").filter({ hasText: "Deploy runbook" })).toBeVisible();
    await shot(b, "07-bob-hub-phone");
  });

  await test.step("the used invite shows a clear page", async () => {
    await b.goto(new URL(inviteLink).pathname);
    await expect(b.getByRole("heading", { name: "This invite has already been used" })).toBeVisible();
  });

  await test.step("Ann promotes Bob to admin", async () => {
    await a.goto(`${hubUrl}/members`);
    const role = a.getByLabel(`Role of ${bob.name}`);
    await expect(role).toHaveValue("contributor");
    await role.selectOption("admin");
    await a.reload();
    await expect(a.getByLabel(`Role of ${bob.name}`)).toHaveValue("admin");
  });

  await test.step("Ann offers ownership; Bob sees it and accepts", async () => {
    await a.getByLabel("New owner").selectOption({ label: `${bob.name} (${bob.email})` });
    await a.getByRole("button", { name: "Start transfer" }).click();
    await expect(a.getByRole("heading", { name: "Ownership transfer pending" })).toBeVisible();
    await b.goto(hubUrl);
    await expect(b.getByText("You have been offered ownership of this hub.")).toBeVisible();
    await b.getByRole("link", { name: "Review the transfer" }).click();
    await b.getByRole("button", { name: "Accept ownership" }).click();
    await expect(b.getByRole("heading", { name: "Ownership transfer pending" })).toBeHidden();
    await expect(b.getByLabel(`Role of ${ann.name}`)).toHaveValue("admin");
    await shot(b, "08-bob-owner-members-phone");
    await a.reload();
    await expect(a.getByRole("link", { name: "Settings" })).toBeVisible();
    await expect(a.getByRole("button", { name: "Leave hub" })).toBeVisible();
  });

  await test.step("Ann creates an API key, shown once, that works", async () => {
    await a.goto("/api-keys");
    await expect(a.getByText("No API keys")).toBeVisible();
    await a.getByLabel("Name").fill("e2e script");
    await a.getByRole("button", { name: "Create key" }).click();
    const key = await a.getByTestId("new-api-key").inputValue();
    expect(key).toMatch(/^egk_/);
    await shot(a, "09-api-keys");
    const me = await a.request.get("/v1/auth/me", { headers: { authorization: `Bearer ${key}` } });
    expect(me.status()).toBe(200);
    expect((await me.json()).data.user.email).toBe(ann.email);
    figures.apiKey = key;
  });

  await test.step("a key made for an agent shows the agent; disconnecting it revokes the agent's key only", async () => {
    await a.getByRole("button", { name: "Done" }).click();
    await expect(a.getByText("No agents yet")).toBeVisible();
    await a.getByLabel("Name").fill("claude on the laptop");
    await a.getByLabel("Agent (optional)").fill("claude-code");
    await a.getByRole("button", { name: "Create key" }).click();
    const agentKey = await a.getByTestId("new-api-key").inputValue();
    const agents = a.getByTestId("connected-agents");
    await expect(agents.getByText("Claude Code")).toBeVisible();
    await expect(agents.getByText("1 key · 0 synced configs")).toBeVisible();
    await a.getByRole("button", { name: "Disconnect claude-code" }).click();
    await a.getByRole("button", { name: "Disconnect agent" }).click();
    await expect(a.getByText("No agents yet")).toBeVisible();
    await expect(a.getByRole("button", { name: "Revoke claude on the laptop" })).toBeHidden();
    expect((await a.request.get("/v1/auth/me", { headers: { authorization: `Bearer ${agentKey}` } })).status()).toBe(401);
    expect((await a.request.get("/v1/auth/me", { headers: { authorization: `Bearer ${figures.apiKey}` } })).status()).toBe(200);
  });

  await test.step("a cross-site write with Ann's cookie is refused", async () => {
    const res = await a.request.post("/v1/hubs", { data: { name: "Planted" }, headers: { origin: "http://evil.example" } });
    expect(res.status()).toBe(403);
  });

  await test.step("a hub with 1,000 memories loads fast and without layout shift", async () => {
    const key = figures.apiKey as string;
    const auth = { authorization: `Bearer ${key}` };
    const created = await a.request.post("/v1/hubs", { data: { name: "Big hub" }, headers: auth });
    expect(created.status()).toBe(201);
    const bigHub = (await created.json()).data.id as string;
    const started = Date.now();
    for (let batch = 0; batch < 1000; batch += 20) {
      await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          a.request
            .post("/v1/memories", {
              headers: { ...auth, "x-hub-id": bigHub },
              data: { content: `# Note ${batch + i}\n\nSeeded memory number ${batch + i} about service ${(batch + i) % 37}.`, source: "import" },
            })
            .then((res) => expect(res.status()).toBe(201)),
        ),
      );
    }
    figures.seedSeconds = (Date.now() - started) / 1000;
    const list = await a.request.get(`/v1/memories?hub_id=${bigHub}&limit=1`, { headers: auth });
    expect((await list.json()).data.total).toBe(1000);

    const measure = async (label: string) => {
      const page = await newPage(browser);
      await page.context().addCookies(await a.context().cookies());
      await trackLayoutShift(page);
      // Timestamp the first frame with the 20 rows in the DOM, from inside the page: Playwright's
      // own polling would add up to half a second to the figure.
      await page.addInitScript(() => {
        const w = window as unknown as { __contentAt?: number };
        const check = () => {
          if (document.querySelectorAll('[data-testid="memory-row"]').length >= 20) w.__contentAt = performance.now();
          else requestAnimationFrame(check);
        };
        requestAnimationFrame(check);
      });
      await page.goto(`/hubs/${bigHub}`);
      await expect(page.getByTestId("memory-row")).toHaveCount(20);
      const timing = await page.evaluate(() => {
        const nav = performance.getEntriesByType("navigation")[0] as PerformanceNavigationTiming;
        const api = (performance.getEntriesByType("resource") as PerformanceResourceTiming[])
          .filter((r) => r.name.includes("/v1/"))
          .map((r) => `${new URL(r.name).pathname} ${Math.round(r.startTime)}→${Math.round(r.responseEnd)}`);
        return {
          contentMs: Math.round((window as unknown as { __contentAt: number }).__contentAt),
          ttfbMs: Math.round(nav.responseStart),
          domContentLoadedMs: Math.round(nav.domContentLoadedEventEnd),
          api,
          cls: (window as unknown as { __cls: number }).__cls,
        };
      });
      await page.waitForTimeout(1000);
      const settled = await page.evaluate(() => (window as unknown as { __cls: number }).__cls);
      figures[label] = { ...timing, clsAfter1s: settled };
      writeFileSync(path.join(ARTIFACTS, "figures.json"), JSON.stringify(figures, null, 2));
      if (label === "hub1000") await shot(page, "10-hub-1000-memories");
      await page.context().close();
      return { ...timing, settled };
    };
    // Right after seeding, background processing of the 1,000 memories competes for the CPU.
    await measure("hub1000_while_processing");
    const drainStarted = Date.now();
    for (;;) {
      let pending = 0;
      let cursor = "";
      do {
        const res = await a.request.get(`/v1/memories?hub_id=${bigHub}&limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`, { headers: auth });
        const body = (await res.json()).data as { memories: { processing_status: string }[]; next_cursor: string };
        pending += body.memories.filter((m) => m.processing_status === "pending" || m.processing_status === "processing").length;
        cursor = body.next_cursor;
      } while (cursor);
      if (pending === 0 || Date.now() - drainStarted > 240_000) {
        figures.processingDrainSeconds = { seconds: (Date.now() - drainStarted) / 1000, pendingLeft: pending };
        break;
      }
      await new Promise((r) => setTimeout(r, 3000));
    }
    await measure("warmup");
    // The budget is for a quiet machine: each cold load (fresh context, empty cache) waits until the
    // CPUs are mostly idle, then the median of five is held to the budget as it is.
    const runs = [];
    const quiet: { waited_ms: number; busy: number }[] = [];
    const quietDeadline = Date.now() + Number(process.env.E2E_QUIET_WAIT_MS ?? 300_000);
    for (let i = 0; i < 5; i++) {
      quiet.push(await untilQuiet(quietDeadline));
      runs.push(await measure(i === 4 ? "hub1000" : `hub1000_run${i + 1}`));
    }
    figures.hub1000_quiet = quiet;
    const sorted = runs.map((r) => r.contentMs).sort((x, y) => x - y);
    figures.hub1000_median_ms = sorted[2];
    figures.hub1000_runs_ms = runs.map((r) => r.contentMs);
    writeFileSync(path.join(ARTIFACTS, "figures.json"), JSON.stringify(figures, null, 2));
    // The target is 1 s on this machine, measured quiet (above), and never relaxed for load. The hub's
    // header and first page come in the HTML (server-side prefetch), so hydration is not on the path.
    figures.hub1000_target_ms = 1000;
    const budget = Number(process.env.E2E_HUB_LOAD_BUDGET_MS ?? 1000);
    figures.hub1000_budget = { budget_ms: budget };
    writeFileSync(path.join(ARTIFACTS, "figures.json"), JSON.stringify(figures, null, 2));
    expect(sorted[2]).toBeLessThanOrEqual(budget);
    for (const run of runs) expect(run.settled).toBeLessThan(0.1);
  });

  figures.clsMainFlow = await a.evaluate(() => (window as unknown as { __cls: number }).__cls);
  writeFileSync(path.join(ARTIFACTS, "figures.json"), JSON.stringify(figures, null, 2));
});

/** Share of all CPUs busy over `ms` (from /proc/stat through os.cpus()). */
async function cpuBusy(ms: number): Promise<number> {
  const sample = () => cpus().reduce((acc, c) => ({ idle: acc.idle + c.times.idle, total: acc.total + Object.values(c.times).reduce((a, b) => a + b, 0) }), { idle: 0, total: 0 });
  const a = sample();
  await new Promise((r) => setTimeout(r, ms));
  const b = sample();
  const total = b.total - a.total;
  return total > 0 ? 1 - (b.idle - a.idle) / total : 0;
}

/**
 * Waits until less than E2E_QUIET_BUSY (default 0.35) of the CPUs are busy over a second, or until
 * `deadline` (E2E_QUIET_WAIT_MS, default 5 minutes, for all five runs together); past it the run is
 * measured anyway and the figures say how busy the machine was.
 */
async function untilQuiet(deadline: number): Promise<{ waited_ms: number; busy: number }> {
  const threshold = Number(process.env.E2E_QUIET_BUSY ?? 0.35);
  const started = Date.now();
  for (;;) {
    const busy = await cpuBusy(1000);
    if (busy < threshold || Date.now() > deadline) {
      return { waited_ms: Date.now() - started, busy: Math.round(busy * 100) / 100 };
    }
  }
}
