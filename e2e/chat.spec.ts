import { expect, test } from "@playwright/test";
import path from "node:path";
import { apiAs, newPage, signUp } from "./support.ts";

const ARTIFACTS = path.resolve(import.meta.dirname, "artifacts");
const stamp = Date.now();
const dee = { name: "Dee Chat", email: `dee-chat-${stamp}@example.test`, password: "dee-password-1" };

test("chat: a streamed answer cites the memory; a save waits for approval in the card", async ({ browser }) => {
  const page = await newPage(browser);
  await signUp(page, dee);

  await test.step("Dee has a memory, processed", async () => {
    const memory = await apiAs(page, "POST", "/v1/memories", {
      content: "# Deploy freeze\n\nThe deploy freeze starts on Friday at 18:00 and lasts until Monday morning. Hotfixes need two approvals.",
    });
    await expect
      .poll(async () => (await apiAs(page, "GET", `/v1/memories/${memory.id}`)).processing_status, { timeout: 60_000 })
      .toBe("done");
  });

  await test.step("she opens Chat from the navigation and starts a chat", async () => {
    await page.getByRole("navigation", { name: "Main" }).getByRole("link", { name: "Chat" }).click();
    await expect(page).toHaveURL(/\/chat$/);
    await expect(page.getByText("No chats yet")).toBeVisible();
    await page.getByRole("button", { name: "New chat" }).click();
    await expect(page.getByTestId("chat-sessions").getByRole("button", { name: /New chat/ })).toBeVisible();
  });

  await test.step("she asks; the answer streams in with a citation of the memory", async () => {
    // The answer is read from its event stream, not fetched once it is done.
    const stream = page.waitForResponse((res) => /\/v1\/chat\/sessions\/[^/]+\/messages\/[^/]+\/stream$/.test(new URL(res.url()).pathname));
    await page.getByLabel("Your message").fill("When does the deploy freeze start?");
    await page.getByRole("button", { name: "Send" }).click();
    expect((await stream).headers()["content-type"]).toContain("text/event-stream");
    await expect(page.getByTestId("chat-question")).toHaveText("When does the deploy freeze start?");
    const answer = page.getByTestId("chat-answer").last();
    await expect(answer).toContainText("Friday at 18:00");
    await expect(answer.getByRole("link", { name: "[1]" })).toBeVisible();
    const source = answer.getByRole("list", { name: "Sources" }).getByRole("link", { name: "Deploy freeze" });
    await expect(source).toHaveAttribute("href", /^\/memories\/[0-9a-f-]{36}$/);
    // The server names the chat after its first message.
    await expect(page.getByTestId("chat-sessions")).toContainText("When does the deploy freeze start?");
    await page.screenshot({ path: path.join(ARTIFACTS, "chat-01-answer.png"), fullPage: true });
  });

  await test.step("Regenerate answers again in place of the last answer", async () => {
    await page.getByRole("button", { name: "Regenerate" }).click();
    await expect(page.getByTestId("chat-answer")).toHaveCount(1);
    await expect(page.getByTestId("chat-answer")).toContainText("Friday at 18:00");
    await expect(page.getByRole("button", { name: "Regenerate" })).toBeEnabled();
  });

  await test.step("“Remember that …” asks for approval; approving saves it", async () => {
    await page.getByLabel("Your message").fill("Remember that the staging database is reset every Sunday night.");
    await page.getByRole("button", { name: "Send" }).click();
    const card = page.getByTestId("chat-approval");
    await expect(card).toContainText("Save this as a memory in “Personal”?");
    await expect(card).toContainText("the staging database is reset every Sunday night.");
    // The session is locked to the waiting turn: sending is off, Stop is offered.
    await expect(page.getByRole("button", { name: "Stop" })).toBeVisible();
    await expect(page.getByRole("button", { name: "Send" })).toBeDisabled();
    await page.screenshot({ path: path.join(ARTIFACTS, "chat-02-approval.png"), fullPage: true });
    await card.getByRole("button", { name: "Approve" }).click();
    await expect(card).toBeHidden();
    await expect(page.getByTestId("chat-answer").last()).toContainText("Saved to “Personal”");
    await expect(page.getByRole("button", { name: "Stop" })).toBeHidden();
    await page.screenshot({ path: path.join(ARTIFACTS, "chat-03-saved.png"), fullPage: true });
  });

  await test.step("a reload shows the conversation oldest first", async () => {
    await page.reload();
    await expect(page.getByTestId("chat-question")).toHaveText(["When does the deploy freeze start?", "Remember that the staging database is reset every Sunday night."]);
    await expect(page.getByTestId("chat-answer").last()).toContainText("Saved to “Personal”");
  });

  await test.step("Stop cancels a turn waiting on its approval", async () => {
    await page.getByLabel("Your message").fill("Remember that the VPN moves to port 8443.");
    await page.getByRole("button", { name: "Send" }).click();
    await expect(page.getByTestId("chat-approval")).toBeVisible();
    await page.getByRole("button", { name: "Stop" }).click();
    await expect(page.getByTestId("chat-answer").last().getByText("stopped")).toBeVisible();
    await expect(page.getByTestId("chat-approval")).toBeHidden();
  });

  await test.step("rename, then delete with a confirmation", async () => {
    await page.getByRole("button", { name: /^Rename/ }).click();
    await page.getByLabel("Chat title").fill("Ops questions");
    await page.getByRole("button", { name: "Save" }).click();
    await expect(page.getByRole("heading", { name: "Ops questions" })).toBeVisible();
    await expect(page.getByTestId("chat-sessions")).toContainText("Ops questions");
    await page.getByRole("button", { name: "Delete", exact: true }).click();
    await page.getByRole("button", { name: "Delete chat" }).click();
    await expect(page.getByText("No chats yet")).toBeVisible();
  });
});
