import { expect, test } from "@playwright/test";
import { newPage, signUp } from "./support.ts";

const stamp = Date.now();
const lee = { name: "Lee Link", email: `lee-link-${stamp}@example.test`, password: "lee-password-1" };

test("linking GitHub from the API keys page starts GitHub's sign-in with a link intent", async ({ browser }) => {
  const page = await newPage(browser);
  await signUp(page, lee);
  await page.goto("/api-keys");
  const card = page.locator("section").filter({ has: page.getByRole("heading", { name: "Sign-in methods" }) });
  await expect(card.getByText("No linked accounts")).toBeVisible();

  // GitHub is out of reach offline: its authorize page is answered here, and the request is what is checked.
  let authorize: URL | undefined;
  await page.route("https://github.com/**", async (route) => {
    authorize = new URL(route.request().url());
    await route.fulfill({ status: 200, contentType: "text/html", body: "<h1>GitHub (stand-in)</h1>" });
  });
  await card.getByRole("link", { name: "Link GitHub" }).click();
  // Nothing leaves for GitHub until the person confirms (a link from another site must not link silently).
  await expect(page.getByRole("heading", { name: "Link GitHub" })).toBeVisible();
  expect(authorize).toBeUndefined();
  await page.getByRole("button", { name: "Continue to GitHub" }).click();
  await expect(page.getByRole("heading", { name: "GitHub (stand-in)" })).toBeVisible({ timeout: 20_000 });
  expect(authorize?.pathname).toBe("/login/oauth/authorize");
  expect(authorize?.searchParams.get("client_id")).toBe("e2e-github-client");
  expect(authorize?.searchParams.get("redirect_uri")).toMatch(/\/api\/auth\/callback\/github$/);
  // The intent the callback will read: signed, for /api/auth only, kept from page scripts.
  const intent = (await page.context().cookies()).find((c) => c.name === "engram-link");
  expect(intent).toMatchObject({ path: "/api/auth", httpOnly: true, sameSite: "Lax" });
  expect(intent!.value).toMatch(/^[\w-]+\.[\w-]+$/);
});

test("every page forbids framing and sniffing: X-Frame-Options, frame-ancestors, nosniff", async ({ browser }) => {
  const page = await newPage(browser);
  for (const path of ["/sign-in", "/v1/health"]) {
    const res = await page.goto(path);
    const headers = res!.headers();
    expect([path, headers["x-frame-options"]]).toEqual([path, "DENY"]);
    expect(headers["content-security-policy"]).toContain("frame-ancestors 'none'");
    expect(headers["x-content-type-options"]).toBe("nosniff");
  }
});

test("a page's scripts all carry its policy's nonce, the not-found page's too (none prebuilt without one)", async ({ browser }) => {
  const page = await newPage(browser);
  for (const path of ["/sign-in", "/no-such-page"]) {
    const res = await page.request.get(path);
    const nonce = /'nonce-([^']+)'/.exec(res.headers()["content-security-policy"] ?? "")?.[1];
    expect([path, nonce]).toEqual([path, expect.any(String)]);
    const scripts = [...(await res.text()).matchAll(/<script\b[^>]*>/g)].map((m) => m[0]);
    expect(scripts.length).toBeGreaterThan(0);
    expect(scripts.filter((tag) => !tag.includes(`nonce="${nonce}"`))).toEqual([]);
  }
});

test("signing out ends the session: its cookie, replayed, no longer signs anyone in", async ({ browser }) => {
  const page = await newPage(browser);
  await signUp(page, { name: "Sam Signout", email: `sam-signout-${stamp}@example.test`, password: "sam-password-1" });
  const session = (await page.context().cookies()).find((c) => c.name.includes("session-token"));
  expect(session).toBeDefined();
  const me = (cookie: string) => page.request.get("/v1/auth/me", { headers: { cookie } });
  expect((await me(`${session!.name}=${session!.value}`)).status()).toBe(200);
  await page.getByRole("button", { name: "Sign out" }).click();
  await expect(page).toHaveURL(/\/sign-in/);
  // A copy of the cookie taken before (a shared machine, a logging proxy) is worth nothing now.
  expect((await me(`${session!.name}=${session!.value}`)).status()).toBe(401);
});
