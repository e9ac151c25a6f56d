import { expect, test } from "@playwright/test";
import path from "node:path";
import { apiAs, newPage, signUp } from "./support.ts";

const ARTIFACTS = path.resolve(import.meta.dirname, "artifacts");
const stamp = Date.now();
const bea = { name: "Bea Boards", email: `bea-boards-${stamp}@example.test`, password: "bea-password-1" };
const vik = { name: "Vik Viewer", email: `vik-boards-${stamp}@example.test`, password: "vik-password-1" };

test("boards: a custom board answers from the hub's memories, is acknowledged, rewritten and deleted; gates are answered on the board", async ({ browser }) => {
  const page = await newPage(browser);
  await signUp(page, bea);
  const created = await apiAs(page, "POST", "/v1/hubs", { name: `Boards hub ${stamp}` });
  const hubId: string = created.hub?.id ?? created.id;
  let memoryId = "";

  await test.step("the team hub has a memory, processed", async () => {
    const memory = await apiAs(
      page,
      "POST",
      "/v1/memories",
      {
        content:
          "# Release checklist\n\nBefore a release the changelog is written and the staging smoke tests must pass.\n\nA bad deploy is rolled back with kubectl rollout undo deployment/api.",
      },
      hubId,
    );
    memoryId = memory.id;
    await expect
      .poll(async () => (await apiAs(page, "GET", `/v1/memories/${memory.id}`)).processing_status, { timeout: 60_000 })
      .toBe("done");
  });

  await test.step("an agent's decision gate is answered with its option buttons", async () => {
    await apiAs(page, "POST", `/v1/hubs/${hubId}/board/decision-gate`, { question: "Which queue for the importer?", options: ["Inngest", "Cron job"], source_agent: "claude-code" });
    await page.goto(`/hubs/${hubId}`);
    await page.getByRole("navigation", { name: "Hub sections" }).getByRole("link", { name: "Boards" }).click();
    await expect(page).toHaveURL(new RegExp(`/hubs/${hubId}/boards$`));
    const gates = page.getByTestId("decision-gates");
    await expect(gates).toContainText("Which queue for the importer?");
    await gates.getByRole("button", { name: "Cron job" }).click();
    await expect(gates).toContainText("answered");
    await expect(gates).toContainText("Chosen: Cron job");
    await expect(gates.getByRole("link", { name: "Decision memory" })).toHaveAttribute("href", /^\/memories\/[0-9a-f-]{36}$/);
    await expect(gates.getByRole("button", { name: "Reopen" })).toBeVisible();
  });

  const board = page.getByTestId("custom-board").filter({ hasText: "Release readiness" });

  await test.step("she creates a board; it cooks, then answers with a citation of the memory", async () => {
    await expect(page.getByText("No custom boards yet")).toBeVisible();
    await page.getByLabel("Board title").fill("Release readiness");
    await page.getByLabel("Board instruction").fill("What must happen before a release?");
    await page.getByRole("button", { name: "Create board" }).click();
    await expect(board).toBeVisible();
    await expect(board.getByTestId("board-instruction")).toHaveText("What must happen before a release?");
    const answer = board.getByTestId("board-answer");
    await expect(answer).toContainText("staging smoke tests");
    await expect(answer.getByRole("link", { name: "[1]" })).toHaveAttribute("href", `/memories/${memoryId}`);
    await expect(board.getByRole("list", { name: "Sources" }).getByRole("link", { name: "Release checklist" })).toHaveAttribute("href", `/memories/${memoryId}`);
    await expect(board.getByTestId("board-status")).toHaveText("active");
    await expect(board.getByTestId("card-state")).toHaveText("new");
    await page.screenshot({ path: path.join(ARTIFACTS, "boards-01-answer.png"), fullPage: true });
  });

  await test.step("she acknowledges the card; Reopen is offered", async () => {
    await board.getByRole("button", { name: "Acknowledge" }).click();
    await expect(board.getByTestId("card-state")).toHaveText("acknowledged");
    await expect(board.getByRole("button", { name: "Reopen" })).toBeVisible();
  });

  await test.step("she marks the answer accurate; her verdict is pressed and counted", async () => {
    await board.getByRole("button", { name: "Accurate", exact: true }).click();
    await expect(board.getByTestId("feedback-tally")).toHaveText("1 accurate");
    await expect(board.getByRole("button", { name: "Accurate", exact: true })).toHaveAttribute("aria-pressed", "true");
    await expect(board.getByTestId("card-state")).toHaveText("acknowledged");
  });

  await test.step("a viewer sees the board and its answer, with nothing to press", async () => {
    const invite = await apiAs(page, "POST", `/v1/hubs/${hubId}/invites`, { role: "viewer" });
    const viewer = await newPage(browser);
    await signUp(viewer, vik);
    await apiAs(viewer, "POST", `/v1/invites/${invite.invite?.token ?? invite.token}/accept`);
    await viewer.goto(`/hubs/${hubId}/boards`);
    const seen = viewer.getByTestId("custom-board").filter({ hasText: "Release readiness" });
    await expect(seen.getByTestId("board-answer")).toContainText("staging smoke tests");
    await expect(seen.getByTestId("feedback-tally")).toHaveText("1 accurate");
    await expect(viewer.getByTestId("decision-gates")).toContainText("Which queue for the importer?");
    await expect(viewer.getByRole("button", { name: "Create board" })).toHaveCount(0);
    for (const name of ["Reopen", "Edit", "Pause", "Delete", "Accurate", "Inaccurate"]) await expect(viewer.getByRole("button", { name, exact: true })).toHaveCount(0);
    await viewer.context().close();
  });

  await test.step("a new instruction cooks again and is answered anew; its history starts empty", async () => {
    await board.getByRole("button", { name: "Edit" }).click();
    await board.getByLabel("Instruction").fill("How is a bad deploy rolled back?");
    await board.getByRole("button", { name: "Save" }).click();
    await expect(board.getByTestId("board-instruction")).toHaveText("How is a bad deploy rolled back?");
    await expect(board.getByTestId("board-status")).toHaveText("cooking");
    await expect(board.getByTestId("board-answer")).toContainText("kubectl rollout undo");
    await expect(board.getByTestId("board-status")).toHaveText("active");
    await expect(board.getByTestId("card-state")).toHaveText("new");
    await board.getByText("History", { exact: true }).click();
    await expect(board.getByText("No earlier answers")).toBeVisible();
    await page.screenshot({ path: path.join(ARTIFACTS, "boards-02-rewritten.png"), fullPage: true });
  });

  await test.step("pause and resume", async () => {
    await board.getByRole("button", { name: "Pause" }).click();
    await expect(board.getByTestId("board-status")).toHaveText("paused");
    await board.getByRole("button", { name: "Resume" }).click();
    await expect(board.getByTestId("board-status")).toHaveText("active");
  });

  await test.step("delete, with a confirmation", async () => {
    await board.getByRole("button", { name: "Delete", exact: true }).click();
    await page.getByRole("button", { name: "Delete board" }).click();
    await expect(board).toHaveCount(0);
    await expect(page.getByText("No custom boards yet")).toBeVisible();
    await page.reload();
    await expect(page.getByText("No custom boards yet")).toBeVisible();
  });
});
