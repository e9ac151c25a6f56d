import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { memax, scratchHome, startEngram, type Engram, type EngramUser } from "./support/engram.ts";

// `memax agents sync` on two devices (two HOME directories) of one account, editing
// ~/.claude/CLAUDE.md in turn and at once, then deleting and restoring it.
describe("memax agents sync across two devices", () => {
  let engram: Engram;
  let ann: EngramUser;
  const laptop = scratchHome();
  const desktop = scratchHome();
  const claudeFile = (home: string) => path.join(home, ".claude", "CLAUDE.md");
  const write = (home: string, text: string) => {
    mkdirSync(path.dirname(claudeFile(home)), { recursive: true });
    writeFileSync(claudeFile(home), text);
  };
  const read = (home: string) => readFileSync(claudeFile(home), "utf8");
  const sync = async (home: string, args: string[] = [], stdin = "") => {
    const result = await memax(engram, ["agents", "sync", ...args], { key: ann.key, home, stdin });
    expect(result.code, result.stderr + result.stdout).toBe(0);
    expect(result.stdout).not.toMatch(/Sync failed|✗/);
    return result.stdout;
  };

  beforeAll(async () => {
    engram = await startEngram();
    ann = await engram.user("Ann");
  });
  afterAll(async () => {
    await engram?.stop();
  });

  it("pushes from the first device and restores onto the second", async () => {
    write(laptop, "# Rules\n- v1\n");
    expect(await sync(laptop)).toMatch(/CLAUDE\.md\s+pushing \(new\)[\s\S]*Done: 1 pushed/);
    // The new device has nothing: the CLI asks before writing a new file.
    expect(await sync(desktop, [], "y\n")).toMatch(/Done: 1 restored/);
    expect(read(desktop)).toBe("# Rules\n- v1\n");
    expect(await sync(desktop)).toMatch(/Done: 1 unchanged/);
    const list = await memax(engram, ["agents", "list"], { key: ann.key, home: desktop });
    expect(list.stdout).toMatch(/claude-code[\s\S]*CLAUDE\.md\s+global/);
    expect(list.stdout).toMatch(/1 config synced to cloud/);
  });

  it("edits made in turn travel both ways", async () => {
    write(desktop, "# Rules\n- v2 from desktop\n");
    expect(await sync(desktop)).toMatch(/pushing \(local newer\)[\s\S]*Done: 1 pushed/);
    expect(await sync(laptop)).toMatch(/pulling \(cloud newer\)[\s\S]*Done: 1 restored/);
    expect(read(laptop)).toBe("# Rules\n- v2 from desktop\n");
    write(laptop, "# Rules\n- v3 from laptop\n");
    expect(await sync(laptop)).toMatch(/Done: 1 pushed/);
    expect(await sync(desktop)).toMatch(/Done: 1 restored/);
    expect(read(desktop)).toBe("# Rules\n- v3 from laptop\n");
  });

  it("edits made at once conflict, nothing is overwritten, and the owner picks a side", async () => {
    write(laptop, "# Rules\n- laptop at once\n");
    write(desktop, "# Rules\n- desktop at once\n");
    expect(await sync(laptop)).toMatch(/Done: 1 pushed/);
    // Non-interactive: the conflict is reported and skipped; neither file changes.
    expect(await sync(desktop)).toMatch(/conflict skipped in non-interactive mode[\s\S]*Done: 1 skipped/);
    expect(read(desktop)).toBe("# Rules\n- desktop at once\n");
    const cloud = await ann.api("GET", "/v1/configs");
    expect(cloud.body.data.configs[0].content).toBe("# Rules\n- laptop at once\n");
    // The desktop keeps its version (--push); the laptop then pulls it.
    expect(await sync(desktop, ["--push"])).toMatch(/Done: 1 pushed/);
    expect(await sync(laptop)).toMatch(/Done: 1 restored/);
    expect(read(laptop)).toBe("# Rules\n- desktop at once\n");
    const versions = await ann.api("GET", `/v1/configs/${cloud.body.data.configs[0].id}/versions`);
    // v1, v2, v3, laptop at once, desktop at once: every version kept.
    expect(versions.body.data.versions).toHaveLength(5);
  });

  it("a deletion everywhere reaches the other device, and restore brings it back", async () => {
    const [config] = (await ann.api("GET", "/v1/configs")).body.data.configs;
    expect((await ann.api("POST", "/v1/configs/batch-delete", { ids: [config.id] })).body.data).toEqual({ deleted: 1, skipped: [] });
    // Non-interactive sync never deletes on its own.
    expect(await sync(laptop)).toMatch(/cloud deleted this config — skipped in non-interactive mode/);
    expect(existsSync(claudeFile(laptop))).toBe(true);
    // (The CLI's summary line skips a run whose only action was a local deletion.)
    expect(await sync(laptop, ["--pull"])).toMatch(/CLAUDE\.md deleted locally \(moved to Memax trash\)/);
    expect(existsSync(claudeFile(laptop))).toBe(false);
    // The laptop acknowledged the deletion: a second sync has nothing to do.
    expect(await sync(laptop)).not.toMatch(/CLAUDE\.md/);
    const deleted = await memax(engram, ["agents", "configs", "deleted"], { key: ann.key, home: laptop });
    expect(deleted.stdout).toMatch(/claude-code CLAUDE\.md global/);
    const restore = await memax(engram, ["agents", "configs", "restore"], { key: ann.key, home: laptop, stdin: "1\n" });
    expect(restore.stdout).toMatch(/CLAUDE\.md restored to cloud and local machine[\s\S]*1 config restored/);
    expect(read(laptop)).toBe("# Rules\n- desktop at once\n");
    expect(await sync(laptop)).toMatch(/Done: 1 unchanged/);
    // The desktop still holds the same text: in sync again, no conflict.
    expect(await sync(desktop)).toMatch(/Done: 1 unchanged/);
  });
});
