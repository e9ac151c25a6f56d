import { z } from "zod";
import { FULL_ACCESS, type AuthContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { readableHubs } from "@/lib/hubs/hub-access.ts";
import { memoryCounts } from "@/lib/quotas/memory-counts.ts";
import { consentTokenUsed } from "./approve-consent.ts";
import { checkAuthorizeRequest } from "./authorize-request.ts";
import { AUTHORIZE_FIELDS } from "./consent-page.ts";
import { checkConsentToken, consentTokenExpiry } from "./consent-token.ts";

/**
 * The longest request id issued or read. GET /oauth/authorize/consent-request carries it in its URL,
 * and a Node server refuses a request whose headers (the request line with them) pass 16 KiB with a
 * 431: at 12 KiB the id leaves room for the consent token and a session cookie. An authorize request
 * whose id would be longer (a state of several KiB) is refused when it arrives, not offered a
 * consent that can never be answered.
 */
export const MAX_REQUEST_ID_CHARS = 12 * 1024;

/**
 * Engram keeps no row for a pending authorization request: the consent form carries the request
 * itself, signed by its CSRF token for the person it was shown to. The request id is that request
 * (the form's authorization fields) made one opaque value, so a front end holding the id and the
 * token holds exactly what the consent page holds, and nothing it could not get from the page.
 */
export function consentRequestId(params: URLSearchParams): string {
  const fields = AUTHORIZE_FIELDS.flatMap((name) => params.getAll(name).map((value) => [name, value]));
  return Buffer.from(JSON.stringify(fields)).toString("base64url");
}

/** The authorization fields of a request id, or null when it is not one (edited, cut short, made up). */
export function consentRequestParams(requestId: string): URLSearchParams | null {
  if (requestId.length > MAX_REQUEST_ID_CHARS || !/^[A-Za-z0-9_-]+$/.test(requestId)) return null;
  try {
    const fields: unknown = JSON.parse(Buffer.from(requestId, "base64url").toString("utf8"));
    if (!Array.isArray(fields)) return null;
    const params = new URLSearchParams();
    for (const field of fields) {
      if (!Array.isArray(field) || field.length !== 2 || typeof field[1] !== "string" || !(AUTHORIZE_FIELDS as readonly unknown[]).includes(field[0])) return null;
      params.append(field[0] as string, field[1]);
    }
    return params;
  } catch {
    return null;
  }
}

export const consentRequestQuerySchema = z.object({
  request_id: z.string({ error: "request_id is required" }).min(1, "request_id is required"),
  consent_token: z.string({ error: "consent_token is required" }).min(1, "consent_token is required"),
});
export type ConsentRequestInput = z.output<typeof consentRequestQuerySchema>;

/** What a read-only credential, or a viewer, may grant: reading only. */
const READ_ONLY = ["read"];
const READ_WRITE = ["read", "write"];

/**
 * GET /oauth/authorize/consent-request: the pending request the consent page shows, as Memax's
 * OAuthConsentRequest. Only for the person it was shown to (the token is signed for their id),
 * while its form is good; anything else is one not_found that says nothing of why.
 */
export async function getConsentRequest(ctx: AuthContext, input: ConsentRequestInput, origin: string) {
  const gone = new ApiError("not_found", "This consent request does not exist or has expired");
  const params = consentRequestParams(input.request_id);
  const now = ctx.now();
  if (!params || !checkConsentToken(await serverSecret(ctx.db), ctx.user.id, params, input.consent_token, now.getTime())) throw gone;
  // Its form was submitted (allowed): a second answer would be refused, so there is nothing to show.
  if (await consentTokenUsed(ctx.db, input.consent_token)) throw gone;
  // Checked again as the form's submission will be: a client deleted since, or its redirect URI dropped, is gone.
  const check = await checkAuthorizeRequest(ctx.db, params, origin, now);
  if (!check.ok) {
    // An outage is said as one, as the authorize page says it: the request may well be answerable shortly.
    if (check.error.error === "temporarily_unavailable") throw new ApiError("unavailable", check.error.description, undefined, check.error.headers);
    throw gone;
  }
  const { request } = check;
  const memberships = await readableHubs({ db: ctx.db, user: ctx.user, credential: { type: "session", ...FULL_ACCESS } });
  const counts = await memoryCounts(ctx.sql, "hub", memberships.map((m) => m.hub.id));
  const hubs = memberships
    .sort((a, b) => (a.hub.hubType === b.hub.hubType ? a.hub.name.localeCompare(b.hub.name) || a.hub.id.localeCompare(b.hub.id) : a.hub.hubType === "personal" ? -1 : 1))
    .map((m) => {
      // A viewer's grant reads there whatever access is allowed: the app cannot write where its person cannot.
      const writes = m.memberRole !== "viewer";
      return {
        id: m.hub.id,
        name: m.hub.name,
        slug: m.hub.slug,
        role: m.memberRole,
        hub_type: m.hub.hubType,
        memory_count: counts.get(m.hub.id) ?? 0,
        // As the consent page: every hub is ticked, and any can be left out.
        checked: true,
        disabled: false,
        capability_label: writes ? "Read and write" : "Read only",
        supported_permissions: writes ? READ_WRITE : READ_ONLY,
      };
    });
  const permissions = [
    { value: "read", label: "Read", description: "Recall and read memories", checked: true, essential: true },
    ...(request.wantsWrite ? [{ value: "write", label: "Write", description: "Save, edit and delete memories", checked: true }] : []),
  ];
  return {
    session_id: input.request_id,
    csrf_token: input.consent_token,
    client_name: request.client.name,
    // Engram names the connected app by its client; there is no separate agent name.
    agent_name: request.client.name,
    resource: request.resource,
    submit_url: `${origin}/oauth/authorize`,
    expires_at: consentTokenExpiry(input.consent_token)!.toISOString(),
    hubs,
    permissions,
    not_requested: request.wantsWrite ? [] : ["write"],
  };
}
