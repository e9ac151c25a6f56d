import { knownClientAddress } from "@/lib/api/client-address.ts";
import { FULL_ACCESS, type AuthUser, type RequestContext } from "@/lib/api/context.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { toApiError } from "@/lib/api/with-auth.ts";
import { serverSecret } from "@/lib/api/server-secret.ts";
import { assertSameOrigin, sessionOf, sessionTokenFrom, sessionUserId } from "@/lib/auth/session.ts";
import { MAX_RETURN_TO_CHARS, signInLocation } from "@/lib/auth/sign-in-location.ts";
import { readableHubs } from "@/lib/hubs/hub-access.ts";
import { approveConsent, consentTokenUsed, denyConsent, formUsed, type Consent } from "./approve-consent.ts";
import { checkAuthorizeRequest, redirectWith, type AuthorizeCheck, type AuthorizeRequest } from "./authorize-request.ts";
import { AUTHORIZE_FIELDS, consentPage, errorPage } from "./consent-page.ts";
import { consentRequestId, consentRequestParams, MAX_REQUEST_ID_CHARS } from "./consent-request.ts";
import { checkConsentToken, consentToken } from "./consent-token.ts";
import { OAuthError, oauthErrorOf } from "./oauth-error.ts";
import { MAX_FORM_BYTES, readOAuthBody } from "./oauth-route.ts";
import { publicOrigin } from "./public-origin.ts";

async function sessionUser(ctx: RequestContext, req: Request): Promise<AuthUser | undefined> {
  const userId = await sessionUserId(ctx.db, sessionTokenFrom(req.headers.get("cookie")));
  if (!userId) return undefined;
  return (await ctx.db.user.findUnique({ where: { id: userId }, select: { id: true, email: true, name: true } })) ?? undefined;
}

function redirect(location: string, status = 302): Response {
  return new Response(null, { status, headers: { location, "cache-control": "no-store", "referrer-policy": "no-referrer" } });
}

/** Errors go back to the client only once its redirect URI is verified; before that the user sees them. */
function failure(check: Extract<AuthorizeCheck, { ok: false }>, origin: string): Response {
  if (!check.redirectUri) return userErrorPage(check.error);
  return redirect(redirectWith(check.redirectUri, { error: check.error.error, error_description: check.error.description, state: check.state, iss: origin }));
}

/**
 * The codes an authorization response may carry (RFC 6749 §4.1.2.1, RFC 8707's invalid_target):
 * a token endpoint's invalid_grant (what a row deleted mid-request maps to) is not one of them.
 */
const AUTHORIZE_ERRORS: readonly string[] = ["invalid_request", "unauthorized_client", "access_denied", "unsupported_response_type", "invalid_scope", "invalid_target", "server_error", "temporarily_unavailable"];

function authorizeEndpointError(error: OAuthError): OAuthError {
  return AUTHORIZE_ERRORS.includes(error.error) ? error : new OAuthError("invalid_request", error.description, error.status, error.headers);
}

function userErrorPage(error: OAuthError): Response {
  // A limit or an outage is no fault of the link: the user (or the client) is told to come back, and when.
  if (error.error === "temporarily_unavailable") return errorPage("Try again later", `${error.description} (${error.error})`, error.status, error.headers);
  if (error.error === "server_error") return errorPage("Something went wrong", `${error.description} (${error.error})`, error.status);
  // A 413 or 415 keeps its meaning; an unknown client is the link's fault here, not a credential to retry (401).
  return errorPage("This sign-in link is not valid", `${error.description} (${error.error})`, error.error === "invalid_client" ? 400 : error.status, error.headers);
}

/**
 * /oauth/authorize's errors that its wrapper answers (the per-address limit, a database down, an
 * unexpected throw): a page for the user in a browser, as its other refusals, not the REST envelope.
 */
export function authorizeErrorPage(error: ApiError): Response {
  return userErrorPage(oauthErrorOf(error));
}

/** GET /oauth/authorize: validate, sign in if needed, then show the consent page. */
export async function showAuthorize(ctx: RequestContext, req: Request): Promise<Response> {
  const origin = publicOrigin(req);
  const url = new URL(req.url);
  const check = await checkAuthorizeRequest(ctx.db, url.searchParams, origin, ctx.now(), knownClientAddress(req));
  if (!check.ok) return failure(check, origin);
  const params = new URLSearchParams(url.searchParams);
  params.set("redirect_uri", check.request.redirectUri);
  const requestId = consentRequestId(params);
  if (requestId.length > MAX_REQUEST_ID_CHARS) {
    const error = new OAuthError("invalid_request", "The authorization request is too long (its state, most likely); keep it under about 8 KiB");
    return failure({ ok: false, error, redirectUri: check.request.redirectUri, state: check.request.state }, origin);
  }
  try {
    const user = await sessionUser(ctx, req);
    if (!user) {
      const signIn = signInLocation(`/oauth/authorize${url.search}`);
      if (signIn) return redirect(signIn);
      // Told to the app at once: the sign-in could never have come back to it.
      const error = new OAuthError("invalid_request", `The authorization request is too long to carry through sign-in (its address escaped is over ${MAX_RETURN_TO_CHARS / 1024} KiB; its state, most likely): sign in to Engram first, or send a shorter one`);
      return failure({ ok: false, error, redirectUri: check.request.redirectUri, state: check.request.state }, origin);
    }
    const csrf = consentToken(await serverSecret(ctx.db), user.id, params, ctx.now().getTime());
    const hubs = await readableHubs({ db: ctx.db, user, credential: { type: "session", ...FULL_ACCESS } });
    return consentPage({ request: check.request, params, user, hubs, csrf, requestId });
  } catch (error) {
    return redirectedFailure(ctx, check.request, origin, error, 302);
  }
}

/**
 * An error once the redirect URI is verified: the app is told (RFC 6749 §4.1.2.1) and can start
 * over or retry, where a page left it waiting for a callback that never came.
 */
function redirectedFailure(ctx: RequestContext, request: AuthorizeRequest, origin: string, error: unknown, status: number): Response {
  const failed = authorizeEndpointError(oauthErrorOf(toApiError(error, ctx.requestId)));
  return redirect(redirectWith(request.redirectUri, { error: failed.error, error_description: failed.description, state: request.state, iss: origin }), status);
}

/**
 * What the user picked. The page posts hubs=all|selected with hub_ids and access=write|read; a front
 * end rendering the consent request's JSON posts what it shows: the ticked hubs' ids (hub_ids, with
 * no `hubs`) and the ticked permissions' values (permissions). Without `hubs`, only the hubs posted
 * are granted: reading their absence as "all" gave an app every hub when one was left unticked.
 */
function consentChoices(form: URLSearchParams): Consent {
  const hubIds = form.get("hubs") === "all" ? null : form.getAll("hub_ids");
  const write = form.has("access") ? form.get("access") === "write" : form.getAll("permissions").includes("write");
  return { hubIds, write };
}

/** POST /oauth/authorize: the consent form. Allow → a grant and a code; deny → access_denied. */
export async function submitAuthorize(ctx: RequestContext, req: Request): Promise<Response> {
  const origin = publicOrigin(req);
  let form: URLSearchParams;
  try {
    form = new URLSearchParams(await readOAuthBody(req, MAX_FORM_BYTES, new OAuthError("invalid_request", "The consent form is too large")));
  } catch (error) {
    if (error instanceof OAuthError) return errorPage("Refused", error.description, 413);
    throw error;
  }
  const signedIn = await sessionOf(ctx.db, sessionTokenFrom(req.headers.get("cookie")));
  if (!signedIn) return errorPage("Signed out", "Your session ended; start connecting the app again.", 401);
  const { user, session } = signedIn;
  try {
    assertSameOrigin(req);
  } catch (error) {
    if (error instanceof ApiError) return errorPage("Refused", error.message, 403);
    throw error;
  }
  // A front end rendering consent itself (GET /oauth/authorize/consent-request) posts the request as
  // the session_id it was given, with Memax's field name for the token; the page posts the fields.
  const requestId = form.get("session_id") ?? form.get("request_id");
  const given = !form.has("client_id") && requestId ? consentRequestParams(requestId) : null;
  const params = given ?? new URLSearchParams();
  if (!given) {
    for (const name of AUTHORIZE_FIELDS) {
      const values = form.getAll(name);
      for (const value of values) params.append(name, value);
    }
  }
  const token = form.get("csrf") ?? form.get("csrf_token");
  if (!token || !checkConsentToken(await serverSecret(ctx.db), user.id, params, token, ctx.now().getTime())) {
    return errorPage("This consent form expired", "Go back to the app and connect again.", 403);
  }
  const check = await checkAuthorizeRequest(ctx.db, params, origin, ctx.now(), knownClientAddress(req));
  if (!check.ok) return failure(check, origin);
  const { request } = check;
  // A form already answered (allowed or denied) is answered once: the app has its code or its
  // access_denied, and the other after it would contradict it. (Both are checked again under the lock.)
  if (await consentTokenUsed(ctx.db, token)) return errorPage("Already submitted", formUsed().message, formUsed().status);
  if (form.get("decision") !== "allow") {
    try {
      await denyConsent(ctx.db, user.id, token, ctx.now());
    } catch (error) {
      if (error instanceof ApiError && error.code === "used") return errorPage("Already submitted", error.message, error.status);
      throw error;
    }
    return redirect(redirectWith(request.redirectUri, { error: "access_denied", error_description: "The user denied access", state: request.state, iss: origin }), 303);
  }
  let code: string;
  try {
    code = await approveConsent(ctx.db, user, request, consentChoices(form), ctx.now(), session, token);
  } catch (error) {
    if (error instanceof ApiError && error.code === "unauthorized") return errorPage("Signed out", "Your session ended; start connecting the app again.", 401);
    // The app got its code from the first submission: this one is the user's to see, not the app's.
    if (error instanceof ApiError && error.code === "used") return errorPage("Already submitted", error.message, error.status);
    return redirectedFailure(ctx, request, origin, error, 303);
  }
  return redirect(redirectWith(request.redirectUri, { code, state: request.state, iss: origin }), 303);
}
