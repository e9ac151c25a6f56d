import type { Membership } from "@/lib/hubs/hub-access.ts";
import type { AuthorizeRequest } from "./authorize-request.ts";
import { CLI_CLIENT_KIND } from "./cli-client.ts";

/** The authorization request travels through the consent form unchanged. */
export const AUTHORIZE_FIELDS = ["client_id", "redirect_uri", "response_type", "code_challenge", "code_challenge_method", "state", "resource", "scope"] as const;

function esc(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]!);
}

const STYLE = `
  :root { color-scheme: light dark; font-family: ui-sans-serif, system-ui, sans-serif; }
  body { margin: 0; min-height: 100vh; display: grid; place-items: center; background: #f4f4f5; color: #18181b; }
  @media (prefers-color-scheme: dark) { body { background: #09090b; color: #f4f4f5; } .card { background: #18181b !important; border-color: #27272a !important; } .muted { color: #a1a1aa !important; } }
  .card { width: min(30rem, 92vw); background: #fff; border: 1px solid #e4e4e7; border-radius: 0.75rem; padding: 1.75rem; box-shadow: 0 1px 2px rgb(0 0 0 / 0.05); }
  h1 { font-size: 1.25rem; margin: 0 0 0.5rem; } .muted { color: #71717a; font-size: 0.875rem; }
  fieldset { border: 0; padding: 0; margin: 1.25rem 0 0; } legend { font-weight: 600; margin-bottom: 0.5rem; }
  label { display: flex; gap: 0.5rem; align-items: baseline; padding: 0.25rem 0; } .hubs { margin-left: 1.5rem; }
  .actions { display: flex; gap: 0.75rem; justify-content: flex-end; margin-top: 1.5rem; }
  button { font: inherit; padding: 0.5rem 1rem; border-radius: 0.5rem; border: 1px solid #d4d4d8; background: transparent; color: inherit; cursor: pointer; }
  button[value=allow] { background: #18181b; color: #fafafa; border-color: #18181b; }
  code { font-size: 0.8125rem; word-break: break-all; }`;

export function htmlPage(title: string, body: string, status = 200, extraHeaders: Record<string, string> = {}): Response {
  const html = `<!doctype html><html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>${esc(title)} · Engram</title><style>${STYLE}</style></head><body><main class="card">${body}</main></body></html>`;
  return new Response(html, {
    status,
    headers: {
      "content-type": "text/html; charset=utf-8",
      "cache-control": "no-store",
      // A consent page must never be framed (clickjacking).
      "x-frame-options": "DENY",
      "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
      "referrer-policy": "no-referrer",
      ...extraHeaders,
    },
  });
}

export function errorPage(title: string, message: string, status = 400, headers: Record<string, string> = {}): Response {
  return htmlPage(title, `<h1>${esc(title)}</h1><p>${esc(message)}</p><p class="muted"><a href="/hubs">Back to Engram</a></p>`, status, headers);
}

export interface ConsentView {
  request: AuthorizeRequest;
  params: URLSearchParams;
  user: { email: string; name: string };
  hubs: Membership[];
  csrf: string;
  /** The pending request as one value: with csrf, what GET /oauth/authorize/consent-request answers for. */
  requestId: string;
}

/** Who is asking, for what; the user picks hubs and read or read/write, then allows or denies. */
export function consentPage(view: ConsentView): Response {
  const { request, params, user, hubs, csrf, requestId } = view;
  const redirectHost = (() => {
    try {
      const url = new URL(request.redirectUri);
      return url.host || url.protocol;
    } catch {
      return request.redirectUri;
    }
  })();
  const hidden = AUTHORIZE_FIELDS.map((name) => {
    const value = name === "redirect_uri" ? request.redirectUri : params.get(name);
    return value === null ? "" : `<input type="hidden" name="${name}" value="${esc(value)}">`;
  }).join("");
  const hubRows = hubs
    .map((m) => `<label><input type="checkbox" name="hub_ids" value="${esc(m.hub.id)}" checked> ${esc(m.hub.name)} <span class="muted">(${esc(m.role)})</span></label>`)
    .join("");
  // What only the built-in CLI client gets (lib/api/with-auth.ts): key management, with every hub and write access.
  const cliNote =
    request.client.kind === CLI_CLIENT_KIND
      ? `<p class="muted">With all your hubs and read and write access, the CLI can also create and revoke API keys for your agents (<code>memax auth create-key</code>, <code>memax setup</code>). Those keys stay until you revoke them.</p>`
      : "";
  const body = `
    <h1>Connect ${esc(request.client.name)} to Engram?</h1>
    <p class="muted">Signed in as ${esc(user.name)} (${esc(user.email)}). After you allow it, you return to <code>${esc(redirectHost)}</code>.</p>
    <p class="muted">It will act as you through <code>${esc(request.resource)}</code>. You can revoke it at any time on the API keys page.</p>${cliNote}
    <form method="post" action="/oauth/authorize">
      ${hidden}<input type="hidden" name="csrf" value="${esc(csrf)}"><input type="hidden" name="request_id" value="${esc(requestId)}">
      <fieldset><legend>Hubs</legend>
        <label><input type="radio" name="hubs" value="all" checked> All my hubs, including ones I join later</label>
        <label><input type="radio" name="hubs" value="selected"> Only these:</label>
        <div class="hubs">${hubRows || '<p class="muted">You belong to no hubs yet.</p>'}</div>
      </fieldset>
      <fieldset><legend>Access</legend>
        <label><input type="radio" name="access" value="write"${request.wantsWrite ? " checked" : " disabled"}> Read and write: recall, read, save and delete memories</label>
        <label><input type="radio" name="access" value="read"${request.wantsWrite ? "" : " checked"}> Read only: recall and read memories</label>
      </fieldset>
      <div class="actions"><button type="submit" name="decision" value="deny">Deny</button><button type="submit" name="decision" value="allow">Allow</button></div>
    </form>`;
  return htmlPage(`Connect ${request.client.name}`, body);
}
