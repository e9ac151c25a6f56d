import { expect, test } from "@playwright/test";
import {
  Client,
  StreamableHTTPClientTransport,
  UnauthorizedError,
  type OAuthClientMetadata,
  type OAuthClientProvider,
  type OAuthDiscoveryState,
  type StoredOAuthClientInformation,
  type StoredOAuthTokens,
} from "@modelcontextprotocol/client";

/**
 * An MCP client given nothing but the URL signs in through a real browser: the SDK client
 * discovers the authorization server from the 401, registers, and sends the user to
 * /oauth/authorize; Chromium signs up on the real sign-in pages, picks hubs and access on the
 * consent page, and lands on the client's callback. Then tools work, and disconnecting the app
 * on the API keys page ends its access.
 */

const CALLBACK = "http://127.0.0.1:3599/callback";
const stamp = Date.now();
const user = { name: "Mia Agent", email: `mia-${stamp}@example.test`, password: "mia-password-1" };

class BrowserProvider implements OAuthClientProvider {
  info?: StoredOAuthClientInformation;
  stored?: StoredOAuthTokens;
  verifier = "";
  discovery?: OAuthDiscoveryState;
  authorizationUrl?: URL;
  get redirectUrl() {
    return CALLBACK;
  }
  get clientMetadata(): OAuthClientMetadata {
    return { client_name: "E2E Agent", redirect_uris: [CALLBACK], grant_types: ["authorization_code", "refresh_token"], response_types: ["code"], token_endpoint_auth_method: "none" };
  }
  clientInformation() {
    return this.info;
  }
  saveClientInformation(info: StoredOAuthClientInformation) {
    this.info = info;
  }
  tokens() {
    return this.stored;
  }
  saveTokens(tokens: StoredOAuthTokens) {
    this.stored = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrl = url;
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
  saveDiscoveryState(state: OAuthDiscoveryState) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
}

function connect(provider: OAuthClientProvider, base: string) {
  const client = new Client({ name: "e2e-agent", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: provider });
  return { client, transport };
}

test("an MCP client with only the URL signs in through the browser, uses tools, and is disconnected", async ({ page, baseURL }) => {
  const base = baseURL!;
  const provider = new BrowserProvider();
  const first = connect(provider, base);
  await expect(first.client.connect(first.transport)).rejects.toBeInstanceOf(UnauthorizedError);
  expect(provider.authorizationUrl?.pathname).toBe("/oauth/authorize");

  // The client's callback: no server listens there; the browser's arrival is the answer.
  let callback: URL | undefined;
  await page.route(`${CALLBACK}**`, async (route) => {
    callback = new URL(route.request().url());
    await route.fulfill({ status: 200, contentType: "text/html", body: "<p>You can close this window.</p>" });
  });

  await page.goto(provider.authorizationUrl!.toString());
  await expect(page).toHaveURL(/\/sign-in\?callbackUrl=%2Foauth%2Fauthorize/);
  await page.getByRole("link", { name: "Create an account" }).click();
  await page.getByLabel("Name").fill(user.name);
  await page.getByLabel("Email").fill(user.email);
  await page.getByLabel("Password").fill(user.password);
  await page.getByRole("button", { name: "Create account" }).click();

  await expect(page.getByRole("heading", { name: "Connect E2E Agent to Engram?" })).toBeVisible();
  await expect(page.getByText(`Signed in as ${user.name}`)).toBeVisible();
  await page.getByLabel("Only these:").check();
  await page.getByLabel(/Personal/).check();
  await page.getByLabel(/Read and write/).check();
  await page.getByRole("button", { name: "Allow" }).click();
  await expect.poll(() => callback?.searchParams.get("code")).toBeTruthy();
  expect(callback!.searchParams.get("iss")).toBe(base);

  await first.transport.finishAuth(callback!.searchParams);
  const second = connect(provider, base);
  await second.client.connect(second.transport);
  const pushed = await second.client.callTool({ name: "engram_push", arguments: { content: "Signed in through the browser", hub_id: "personal" } });
  expect(pushed.isError).toBeFalsy();
  const listed = await second.client.callTool({ name: "engram_list", arguments: {} });
  expect(JSON.stringify(listed.structuredContent)).toContain("Signed in through the browser");
  await second.client.close();

  // The dashboard lists the app; disconnecting it ends its tokens.
  await page.goto("/api-keys");
  const apps = page.getByTestId("connected-apps");
  await expect(apps.getByText("E2E Agent")).toBeVisible();
  await page.getByRole("button", { name: "Disconnect E2E Agent" }).click();
  await page.getByRole("dialog").getByRole("button", { name: "Disconnect" }).click();
  await expect(page.getByText("No connected apps")).toBeVisible();
  const after = await fetch(`${base}/mcp`, {
    method: "POST",
    headers: { authorization: `Bearer ${provider.stored!.access_token}`, "content-type": "application/json", accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
  expect(after.status).toBe(401);
});
