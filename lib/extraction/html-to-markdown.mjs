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

/**
 * How deep elements may nest before the deeper ones are laid side by side. Readability, turndown and
 * domino (turndown's parser) recurse once per level and rescan the levels above: 3,000 nested divs
 * kept the worker busy past its 30 s limit, 40,000 (200 KB) overflowed its stack. Real pages stay far
 * below this depth; Chromium's HTML parser flattens the same way at 512.
 */
const MAX_NESTING = 256;

/** The page parsed, with everything nested deeper than MAX_NESTING flattened (see there). */
function parsePage(html) {
  const { document } = parseHTML(html);
  const root = document.documentElement;
  if (!root) return document;
  // Iterative on purpose: a recursive walk would overflow on exactly the pages this is for.
  let node = root;
  let depth = 1;
  for (;;) {
    if (depth === MAX_NESTING && node.nodeType === 1) liftDescendants(node);
    else if (node.firstChild) {
      node = node.firstChild;
      depth++;
      continue;
    }
    while (node !== root && !node.nextSibling) {
      node = node.parentNode;
      depth--;
    }
    if (node === root) return document;
    node = node.nextSibling;
  }
}

/**
 * Makes every descendant of `element` its child, in document order, as a browser's parser does past
 * its depth limit: the text keeps its order and its paragraphs, only the deeper structure is lost.
 * An element holding only text (a paragraph, a script, a style) moves whole, so that what turndown
 * drops (scripts, styles) is still dropped and a paragraph stays one.
 */
function liftDescendants(element) {
  const order = [];
  let node = element.firstChild;
  while (node) {
    order.push(node);
    if (node.firstElementChild) {
      node = node.firstChild;
      continue;
    }
    while (node !== element && !node.nextSibling) node = node.parentNode;
    node = node === element ? null : node.nextSibling;
  }
  for (const child of order) element.appendChild(child);
}

/** HTML to markdown: the readable article when Readability finds one, else the whole body. */
export function htmlToMarkdown(html) {
  const document = parsePage(html);
  const pageTitle = (document.querySelector("title")?.textContent ?? "").replace(/\s+/g, " ").trim();
  let article = null;
  try {
    // Readability takes apart the document it reads: it gets a copy, so that a page with no article
    // still has its body below without being parsed (and flattened) a second time.
    article = new Readability(document.cloneNode(true), { charThreshold: 100 }).parse();
  } catch {
    article = null;
  }
  const service = turndown();
  const body = article?.content ? service.turndown(article.content) : service.turndown(document.body?.innerHTML ?? html);
  return { title: (article?.title ?? "").replace(/\s+/g, " ").trim() || pageTitle, markdown: body.replace(/\n{3,}/g, "\n\n").trim() };
}

/**
 * Word's HTML (mammoth) to markdown: headings stay headings, a picture leaves its alt text. Flattened
 * past MAX_NESTING as a page is: tables nested a few hundred deep overflowed turndown's stack.
 */
export function fragmentToMarkdown(html) {
  const service = turndown();
  service.addRule("pictureAlt", {
    filter: (node) => node.nodeName === "IMG" && !node.getAttribute("src"),
    replacement: (_content, node) => {
      const alt = (node.getAttribute("alt") ?? "").replace(/\s+/g, " ").trim();
      return alt ? `(picture: ${alt})` : "";
    },
  });
  const body = parsePage(`<!doctype html><html><head></head><body>${html}</body></html>`).body;
  return service.turndown(body?.innerHTML ?? html).replace(/\n{3,}/g, "\n\n").trim();
}
