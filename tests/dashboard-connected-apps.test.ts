import { parseHTML } from "linkedom";
import { act, createElement } from "react";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import { newId } from "@/lib/ids.ts";
import { createHarness, type Client, type Harness } from "./support/harness.ts";
import { dispatch } from "./support/router.ts";

/**
 * The dashboard's connected-apps card (components/connected-apps.tsx), rendered by React into a
 * linkedom document; its requests go to the real route handlers with the user's key, as the
 * browser's go with its session.
 */
let h: Harness;
let ann: Client;
let document: Document;
let window: Window & typeof globalThis;

beforeAll(async () => {
  h = await createHarness();
  ann = await h.user("Ann");
  ({ window, document } = parseHTML("<!doctype html><html><body><div id=root></div></body></html>") as unknown as { window: Window & typeof globalThis; document: Document });
  Object.assign(window, { location: new URL("http://engram.test/api-keys") });
  // linkedom has no modal dialogs: open and close as the attribute, which is what the card reads.
  Object.assign(window.HTMLElement.prototype, {
    showModal(this: HTMLElement) {
      this.setAttribute("open", "");
    },
    close(this: HTMLElement) {
      this.removeAttribute("open");
    },
  });
  Object.defineProperty(window.HTMLElement.prototype, "open", {
    get(this: HTMLElement) {
      return this.hasAttribute("open");
    },
    configurable: true,
  });
  Object.assign(globalThis, { window, document, navigator: window.navigator, IS_REACT_ACT_ENVIRONMENT: true });
  vi.stubGlobal("fetch", (input: string, init: RequestInit = {}) =>
    dispatch(new Request(new URL(input, "http://engram.test"), { ...init, headers: { ...(init.headers as Record<string, string>), authorization: `Bearer ${ann.key}` } })),
  );
});
afterAll(async () => {
  vi.unstubAllGlobals();
  await h?.close();
});

/** Lets the card's requests settle and React render what they brought. */
async function settle() {
  for (let i = 0; i < 20; i++) await act(() => new Promise((resolve) => setTimeout(resolve, 10)));
}

const rows = () => [...(document.querySelector('ul[data-testid="connected-apps"]')?.querySelectorAll("li") ?? [])];
const button = (label: string) => [...document.querySelectorAll("button")].find((b) => b.textContent?.trim() === label || b.getAttribute("aria-label") === label);
const click = (element: Element) => act(async () => void element.dispatchEvent(new window.Event("click", { bubbles: true })));

describe("the connected-apps card", () => {
  it("reaches every app past the first page (100): each can be seen and disconnected", async () => {
    // 15 apps with 10 grants each (the most one app may hold): 150 connected apps.
    const clients = Array.from({ length: 15 }, (_, i) => ({ id: `ec_app_${i}`, name: `App ${String(i).padStart(2, "0")}`, redirectUris: ["https://app.example/cb"], kind: "registered" }));
    await h.db.oAuthClient.createMany({ data: clients });
    const start = Date.now() - 60_000;
    const grants = clients.flatMap((client, c) =>
      Array.from({ length: 10 }, (_, g) => ({ id: newId(), userId: ann.id, clientId: client.id, hubIds: [], allHubs: true, scope: "read", resource: "http://engram.test/mcp", createdAt: new Date(start + c * 10 + g) })),
    );
    await h.db.oAuthGrant.createMany({ data: grants });
    await h.db.oAuthCode.createMany({
      data: grants.map((grant) => ({ codeHash: `code-${grant.id}`, grantId: grant.id, redirectUri: "https://app.example/cb", codeChallenge: "x", resource: grant.resource, expiresAt: new Date(Date.now() + 600_000) })),
    });

    const { ConnectedApps } = await import("@/components/connected-apps.tsx");
    const { createRoot } = await import("react-dom/client");
    const root = createRoot(document.getElementById("root")!);
    await act(async () => root.render(createElement(ConnectedApps)));
    await settle();
    expect(rows()).toHaveLength(100);
    // The oldest app (App 00) is on the second page only.
    expect(rows().some((row) => row.textContent?.includes("App 00"))).toBe(false);

    const more = button("Show more connected apps");
    expect(more, "a way to the apps past the first page").toBeDefined();
    await click(more!);
    await settle();
    expect(rows()).toHaveLength(150);
    expect(new Set(rows().map((row) => row.querySelector("button")!.getAttribute("aria-label"))).size).toBe(15);
    expect(button("Show more connected apps")).toBeUndefined();

    // Disconnect one of App 00's grants, shown only on the second page.
    const oldest = grants[0]!;
    const before = rows().length;
    await click(rows()[before - 1]!.querySelector("button")!);
    await settle();
    await act(async () => void document.querySelector("dialog form")!.dispatchEvent(new window.Event("submit", { bubbles: true, cancelable: true })));
    await settle();
    expect((await h.db.oAuthGrant.findUniqueOrThrow({ where: { id: oldest.id } })).revokedAt).not.toBeNull();
    expect(await h.db.oAuthGrant.count({ where: { userId: ann.id, revokedAt: { not: null } } })).toBe(1);
    expect(rows()).toHaveLength(before - 1);
    await act(async () => root.unmount());
  });
});
