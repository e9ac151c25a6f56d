import { describe, expect, it, vi } from "vitest";

// Counts the parses of the HTML parser (a third-party package; our own code runs unmocked).
const parses = vi.hoisted(() => ({ count: 0 }));
vi.mock("linkedom", async (importOriginal) => {
  const linkedom = await importOriginal<typeof import("linkedom")>();
  return {
    ...linkedom,
    parseHTML: (...args: Parameters<typeof linkedom.parseHTML>) => {
      parses.count++;
      return linkedom.parseHTML(...args);
    },
  };
});

const { htmlToMarkdown } = await import("@/lib/extraction/html-to-markdown.mjs");

describe("a page without an article", () => {
  it("is parsed once, and its whole body becomes the markdown", () => {
    // Readability found no article in a short page: the page was then parsed (and flattened) a second time.
    parses.count = 0;
    // Readability drops a <footer> as page furniture, which leaves it nothing: the body is read instead.
    const doc = htmlToMarkdown("<html><head><title>Kiln</title></head><body><footer>Studio hours: 9 to 5.</footer><script>x()</script></body></html>");
    expect(doc).toEqual({ title: "Kiln", markdown: "Studio hours: 9 to 5." });
    expect(parses.count).toBe(1);
  });

  it("a page with an article is read as before", () => {
    parses.count = 0;
    const text = "Bisque firing at cone 04, slow cooling overnight, then glaze at cone 6. ".repeat(20);
    const doc = htmlToMarkdown(`<html><head><title>Kiln log</title></head><body><nav>Home</nav><article><h1>Kiln log</h1><p>${text}</p></article></body></html>`);
    expect(doc.markdown).toContain("Bisque firing at cone 04");
    expect(doc.markdown).not.toContain("Home");
    expect(parses.count).toBe(1);
  });
});
