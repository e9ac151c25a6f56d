import ReactMarkdown, { type Components } from "react-markdown";
import remarkGfm from "remark-gfm";

/**
 * Memory content is untrusted: raw HTML is dropped (skipHtml, no rehype-raw), react-markdown's
 * default URL filter strips javascript: and similar links, and images are shown as links so
 * opening a memory never fetches from a third-party server.
 */
const components: Components = {
  // The page title is the only h1; content headings move down one level (sizes follow in CSS).
  h1: ({ children }) => <h2 data-level="1">{children}</h2>,
  h2: ({ children }) => <h3 data-level="2">{children}</h3>,
  h3: ({ children }) => <h4 data-level="3">{children}</h4>,
  h4: ({ children }) => <h5 data-level="4">{children}</h5>,
  h5: ({ children }) => <h6 data-level="5">{children}</h6>,
  a: ({ href, children }) => (
    <a href={href} target="_blank" rel="noopener noreferrer nofollow">
      {children}
    </a>
  ),
  img: ({ src, alt }) =>
    typeof src === "string" && src ? (
      <a href={src} target="_blank" rel="noopener noreferrer nofollow">
        [image: {alt || src}]
      </a>
    ) : (
      <span>[image: {alt}]</span>
    ),
};

export function Markdown({ children }: { children: string }) {
  return (
    <div className="prose-memory">
      <ReactMarkdown remarkPlugins={[remarkGfm]} skipHtml components={components}>
        {children}
      </ReactMarkdown>
    </div>
  );
}
