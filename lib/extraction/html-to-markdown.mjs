// HTML to markdown, for fetched pages, HTML files and mammoth's output. Plain ESM: the extraction
// worker (extract-worker.mjs) loads it directly, outside the Next bundle.
import { Readability } from "@mozilla/readability";
import { parseHTML } from "linkedom";
import TurndownService from "turndown";

function turndown() {
  const service = new TurndownService({ headingStyle: "atx", codeBlockStyle: "fenced", bulletListMarker: "-" });
  service.remove(["script", "style", "noscript", "iframe", "form"]);
  return service;
}

/** HTML to markdown: the readable article when Readability finds one, else the whole body. */
export function htmlToMarkdown(html) {
  const { document } = parseHTML(html);
  const pageTitle = (document.querySelector("title")?.textContent ?? "").replace(/\s+/g, " ").trim();
  let article = null;
  try {
    article = new Readability(document, { charThreshold: 100 }).parse();
  } catch {
    article = null;
  }
  const service = turndown();
  const body = article?.content ? service.turndown(article.content) : service.turndown(parseHTML(html).document.body?.innerHTML ?? html);
  return { title: (article?.title ?? "").replace(/\s+/g, " ").trim() || pageTitle, markdown: body.replace(/\n{3,}/g, "\n\n").trim() };
}

/** Word's HTML (mammoth) to markdown: headings stay headings, a picture leaves its alt text. */
export function fragmentToMarkdown(html) {
  const service = turndown();
  service.addRule("pictureAlt", {
    filter: (node) => node.nodeName === "IMG" && !node.getAttribute("src"),
    replacement: (_content, node) => {
      const alt = (node.getAttribute("alt") ?? "").replace(/\s+/g, " ").trim();
      return alt ? `(picture: ${alt})` : "";
    },
  });
  return service.turndown(html).replace(/\n{3,}/g, "\n\n").trim();
}
