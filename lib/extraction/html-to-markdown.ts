import { Readability } from "@mozilla/readability";
import { parseHTML } from "linkedom";
import TurndownService from "turndown";

export interface ReadableDocument {
  title: string;
  markdown: string;
}

function turndown(): TurndownService {
  const service = new TurndownService({ headingStyle: "atx", codeBlockStyle: "fenced", bulletListMarker: "-" });
  service.remove(["script", "style", "noscript", "iframe", "form"]);
  return service;
}

/** HTML to markdown: the readable article when Readability finds one, else the whole body. */
export function htmlToMarkdown(html: string): ReadableDocument {
  const { document } = parseHTML(html);
  const pageTitle = (document.querySelector("title")?.textContent ?? "").replace(/\s+/g, " ").trim();
  let article: { title?: string | null; content?: string | null } | null = null;
  try {
    article = new Readability(document as unknown as Document, { charThreshold: 100 }).parse();
  } catch {
    article = null;
  }
  const service = turndown();
  const body = article?.content ? service.turndown(article.content) : service.turndown(parseHTML(html).document.body?.innerHTML ?? html);
  return { title: (article?.title ?? "").replace(/\s+/g, " ").trim() || pageTitle, markdown: body.replace(/\n{3,}/g, "\n\n").trim() };
}

/** Word's HTML (mammoth) to markdown: headings stay headings, a picture leaves its alt text. */
export function fragmentToMarkdown(html: string): string {
  const service = turndown();
  service.addRule("pictureAlt", {
    filter: (node) => node.nodeName === "IMG" && !node.getAttribute("src"),
    replacement: (_content, node) => {
      const alt = ((node as HTMLElement).getAttribute("alt") ?? "").replace(/\s+/g, " ").trim();
      return alt ? `(picture: ${alt})` : "";
    },
  });
  return service.turndown(html).replace(/\n{3,}/g, "\n\n").trim();
}
