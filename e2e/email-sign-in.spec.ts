import { expect, test } from "@playwright/test";
import { apiAs, newPage } from "./support.ts";

// The e2e server returns codes in the answer (ENGRAM_EMAIL_CODE_DEV_RETURN=1, e2e/global-setup.ts), so e-mail sign-in is on with no mail server.
const email = `ema-code-${Date.now()}@example.test`;

test("/login?provider=email opens the e-mail code sign-in: address, code, signed in", async ({ browser }) => {
  const page = await newPage(browser);
  await page.goto("/login?provider=email&callbackUrl=%2Fhubs");
  await expect(page).toHaveURL(/\/sign-in\?provider=email&callbackUrl=%2Fhubs$/);
  await expect(page.getByLabel("Password")).toHaveCount(0);
  await page.getByLabel("Email").fill(email);
  await page.getByRole("button", { name: "Send code" }).click();
  await expect(page.getByText(`We sent a six-digit code to ${email}`)).toBeVisible();
  // A development server answers with the code, and the form fills it in.
  await expect(page.getByLabel("Code")).toHaveValue(/^\d{6}$/);
  await page.getByRole("button", { name: "Sign in", exact: true }).click();
  await expect(page).toHaveURL(/\/hubs$/);
  const me = await apiAs(page, "GET", "/v1/auth/me");
  expect(me.user.email).toBe(email);
});
