import { expect, type Browser, type Page } from "@playwright/test";

/** Helpers the specs share; this file holds no tests (Playwright only runs *.spec.ts). */

export async function newPage(browser: Browser, viewport = { width: 1280, height: 900 }) {
  const context = await browser.newContext({ viewport, baseURL: process.env.E2E_BASE_URL });
  return context.newPage();
}

export async function signUp(page: Page, who: { name: string; email: string; password: string }) {
  await page.goto("/sign-up");
  await page.getByLabel("Name").fill(who.name);
  await page.getByLabel("Email").fill(who.email);
  await page.getByLabel("Password").fill(who.password);
  await page.getByRole("button", { name: "Create account" }).click();
  await expect(page).toHaveURL(/\/hubs$/);
}

/** The page's own session calls the API (what the dashboard's buttons do), returning `data`. */
export async function apiAs(page: Page, method: string, url: string, body?: unknown, hubId?: string) {
  return page.evaluate(
    async ({ method, url, body, hubId }) => {
      const res = await fetch(url, {
        method,
        headers: { "content-type": "application/json", ...(hubId ? { "x-hub-id": hubId } : {}) },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
      const json = await res.json();
      if (!res.ok) throw new Error(`${method} ${url}: ${res.status} ${JSON.stringify(json)}`);
      return json.data;
    },
    { method, url, body, hubId },
  );
}
