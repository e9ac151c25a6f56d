import { getDatabase } from "@/lib/db/database.ts";
import { isDatabaseUnavailable, isForeignKeyViolation, isRecordGone, isTransactionExpired, isUniqueViolation, violatedConstraint } from "@/lib/db/errors.ts";
import { newId, normalizeId } from "@/lib/ids.ts";
import { credentialWrites, isSignedInCli, targetHubOrThrow } from "@/lib/hubs/hub-access.ts";
import { resolveCredential } from "@/lib/auth/resolve-credential.ts";
import { hasSessionCookie, resolveSession } from "@/lib/auth/session.ts";
import { MCP_PATHS, publicOrigin, resourceFor } from "@/lib/oauth/public-origin.ts";
import { clientAddress } from "./client-address.ts";
import type { AuthContext, HubContext, RequestContext } from "./context.ts";
import { errorResponse } from "./envelope.ts";
import { ApiError } from "./errors.ts";
import type { Permission } from "./permissions.ts";
import { rateLimiter, rateLimitHeaders, type Bucket, type RateLimitResult, type StatementCharge } from "./rate-limit.ts";
import { addWarning, warningHeader } from "./warnings.ts";
import { retryAfterSeconds } from "./retry-after-seconds.ts";

type Params = Record<string, string>;
type NextContext = { params: Promise<Record<string, string | string[] | undefined>> };
export type RouteHandler = (req: Request, context: NextContext) => Promise<Response>;

interface Options {
  /** Rate-limit bucket (default regular). */
  bucket?: Bucket;
  /**
   * The handler takes the request's rate-limit tokens itself (MCP: one per tool call, from the bucket
   * of the call's REST endpoint) and answers a refusal in its own protocol; none is taken here. It
   * then checks the regular bucket (RateLimiter.peek) before reading a large body.
   */
  chargedByHandler?: boolean;
  /** A POST that only reads (recall): allowed for read-only API keys. */
  reads?: boolean;
  /** Manages the account itself (API keys, profile, new hubs): needs a credential limited to no hubs and not read-only. */
  account?: boolean;
  /**
   * Lists, issues, changes or revokes credentials (API keys, connected apps): not with an OAuth access
   * token, whose one-hour, consented reach must not turn into a key that outlives its grant, nor show
   * an app its user's other credentials.
   */
  credentials?: boolean;
  /**
   * The caller's own account data beyond memories (agent configs and sessions, personas, settings,
   * agents): not through a key limited to some hubs — a team bot's key must not read its owner's
   * private transcripts — nor through a connected app's token, whose consent covers memories.
   */
  personal?: boolean;
  /**
   * Bearer-only endpoints (MCP): no session cookie, OAuth access tokens accepted when bound
   * to one of these resources, and `challenge` becomes the WWW-Authenticate of every 401.
   */
  bearer?: { resources: (req: Request) => string[]; challenge: (req: Request) => string };
  /** Answers a thrown error in the endpoint's own protocol (MCP: JSON-RPC) instead of the REST envelope. */
  errorResponse?: (error: ApiError) => Response;
}

interface HubOptions extends Options {
  /** Resolve the target hub (X-Hub-ID, else the personal hub) and require this permission there. */
  permission: Permission;
}

/** Authenticated route acting on one hub: ctx has user, hub and role. */
export function withAuth<P extends Params = Params>(
  options: HubOptions,
  handler: (ctx: HubContext, req: Request, params: P) => Promise<Response>,
): RouteHandler;
/** Authenticated route that is not about one hub (or resolves hubs itself). */
export function withAuth<P extends Params = Params>(
  options: Options,
  handler: (ctx: AuthContext, req: Request, params: P) => Promise<Response>,
): RouteHandler;
export function withAuth<P extends Params>(
  options: Options & { permission?: Permission },
  handler: (ctx: never, req: Request, params: P) => Promise<Response>,
): RouteHandler {
  return handle(options.bucket ?? "regular", options.errorResponse, async (base, req, params, limit) => {
    const { ctx: authCtx, charged } = await authenticateCharging(base, req, options.bearer, options.chargedByHandler ? undefined : limit.charging());
    const { user, credential } = authCtx;
    // The hub lookup needs only the caller, like the rate limit: on PostgreSQL the two run on two
    // connections at once (a round trip less for every hub route). Its result or error is taken
    // only after the limit's and the credential's checks, so those still answer first.
    const hub = options.permission ? resolveHub(authCtx, options.permission) : undefined;
    hub?.catch(() => {});
    if (!options.chargedByHandler) await limit(user.id, charged);
    if (!credentialWrites(credential) && !options.reads && !READ_METHODS.has(req.method)) {
      throw new ApiError("forbidden", "This API key is read-only (scopes: read); it cannot make changes");
    }
    if (options.account && (credential.hubIds !== null || !credentialWrites(credential))) {
      throw new ApiError("forbidden", "This API key is limited to some hubs or to reading; account settings need an unrestricted key");
    }
    if (options.personal && credential.hubIds !== null) {
      throw new ApiError("forbidden", "This API key is limited to some hubs; agent configs, sessions, personas and settings need a key for the whole account");
    }
    if (options.personal && credential.type === "access_token" && !isSignedInCli(credential)) {
      throw new ApiError("forbidden", "A connected app (OAuth access token) cannot reach agent configs, sessions, personas or settings; use an API key or the dashboard");
    }
    if (options.credentials && credential.type === "access_token" && !isSignedInCli(credential)) {
      throw new ApiError("forbidden", "An OAuth access token cannot see or manage API keys or connected apps; use an API key or the dashboard");
    }
    const ctx = hub ? await hub : authCtx;
    return (handler as (ctx: AuthContext, req: Request, params: P) => Promise<Response>)(ctx, req, params as P);
  });
}

/** The caller of a request: its bearer credential, or (not on bearer-only endpoints) the dashboard session. */
export async function authenticate(base: RequestContext, req: Request, bearer?: Options["bearer"]): Promise<AuthContext> {
  return (await authenticateCharging(base, req, bearer, undefined)).ctx;
}

/**
 * authenticate, charging the request's rate limit in the same statement when it can (an API key and
 * a limiter in the database): `charged` is then the limit's answer; undefined, the caller charges.
 */
async function authenticateCharging(
  base: RequestContext,
  req: Request,
  bearer: Options["bearer"],
  charge: StatementCharge | undefined,
): Promise<{ ctx: AuthContext; charged?: RateLimitResult }> {
  // The dashboard's session cookie counts only when no Authorization header was sent.
  const authorization = req.headers.get("authorization");
  try {
    const { user, credential, charged }: Awaited<ReturnType<typeof resolveCredential>> =
      !bearer && !authorization && hasSessionCookie(req)
        ? await resolveSession(base.db, req, base.now())
        : await resolveCredential(base, authorization, base.now(), { resources: bearer ? bearer.resources(req) : serverResources(req), charge });
    const given = req.headers.get("x-hub-id")?.trim();
    const hubHeader = given ? normalizeId(given) : undefined;
    return { ctx: { ...base, user, credential, hubHeader }, charged };
  } catch (error) {
    if (bearer && error instanceof ApiError && error.code === "unauthorized") {
      throw new ApiError(error.code, error.message, error.details, { ...error.headers, "WWW-Authenticate": bearer.challenge(req) });
    }
    throw error;
  }
}

/**
 * On REST, OAuth access tokens issued for any of this server's resources (its MCP endpoints) count:
 * the audience is this Engram server, and the grant's hubs and read/write limits still apply.
 */
function serverResources(req: Request): string[] {
  const origin = publicOrigin(req);
  return MCP_PATHS.map((path) => resourceFor(origin, path));
}


/** A route that needs no credential; rate-limited per client address. */
export function withPublic<P extends Params = Params>(
  options: Options,
  handler: (ctx: RequestContext, req: Request, params: P) => Promise<Response>,
): RouteHandler {
  return handle(options.bucket ?? "light", options.errorResponse, async (base, req, params, limit) => {
    await limit(`ip:${clientAddress(req)}`);
    return handler(base, req, params as P);
  });
}

/**
 * Charges the request's bucket for `identity` (or takes `charged`, the answer of a charge made in
 * another statement), throwing rate_limited when refused. `charging()`: that charge, when the limiter can make it.
 */
type Limit = ((identity: string, charged?: RateLimitResult) => Promise<void>) & { charging(): StatementCharge | undefined };

function handle(
  bucket: Bucket,
  formatError: ((error: ApiError) => Response) | undefined,
  run: (base: RequestContext, req: Request, params: Params, limit: Limit) => Promise<Response>,
): RouteHandler {
  return async (req, context) => {
    const requestId = requestIdFrom(req);
    let limited: RateLimitResult | undefined;
    let response: Response;
    try {
      const database = await getDatabase().catch((error) => {
        console.error(`[${requestId}] database unavailable`, error);
        // The same answer as a connection lost mid-request (toApiError), Retry-After included.
        throw new ApiError("unavailable", "The database is not available; try again shortly", undefined, { "Retry-After": "2" });
      });
      const base: RequestContext = {
        db: database.prisma,
        sql: database.sql,
        dbKind: database.kind,
        requestId,
        now: () => new Date(),
        timeZone: timeZoneFrom(req),
      };
      const limit: Limit = Object.assign(
        async (identity: string, charged?: RateLimitResult) => {
          limited = charged ?? (await rateLimiter().limit(bucket, identity));
          if (!limited.success) {
            const retryAfter = retryAfterSeconds(limited.retryAfterMs);
            throw new ApiError(
              "rate_limited",
              `Rate limit of ${limited.limit} requests per minute exceeded; retry in ${retryAfter}s`,
              { limit: limited.limit, retry_after: retryAfter },
              { "Retry-After": String(retryAfter) },
            );
          }
        },
        { charging: () => rateLimiter().charging?.(bucket) },
      );
      response = await run(base, req, flattenParams(await context.params), limit);
    } catch (error) {
      response = formatError ? formatError(toApiError(error, requestId)) : toErrorResponse(error, requestId);
    }
    // An event stream keeps its "no-transform": without it the server's gzip would buffer the events.
    if (!response.headers.get("cache-control")?.includes("no-transform")) response.headers.set("Cache-Control", "no-store");
    response.headers.set("X-Request-Id", requestId);
    const warning = warningHeader(req);
    if (warning) response.headers.set("X-Engram-Warning", warning);
    if (limited) for (const [name, value] of Object.entries(rateLimitHeaders(limited))) response.headers.set(name, value);
    return response;
  };
}

/** Any throw becomes the envelope; unknown errors are logged and never leak. */
export function toErrorResponse(error: unknown, requestId: string): Response {
  return errorResponse(toApiError(error, requestId));
}

/**
 * The ApiError any throw stands for: REST's envelope and MCP's tool errors both answer with it, so
 * an agent is told to retry (unavailable) or that the thing is gone (not_found) as a REST client is.
 */
export function toApiError(error: unknown, requestId: string): ApiError {
  if (error instanceof ApiError) return error;
  if (isDatabaseUnavailable(error)) {
    // A database restart or failover, not a bug: 503 tells clients to retry.
    console.error(`[${requestId}] database unavailable`, error instanceof Error ? error.message.split("\n").at(-1) : error);
    return new ApiError("unavailable", "The database is not available; try again shortly", undefined, { "Retry-After": "2" });
  }
  if (isTransactionExpired(error)) {
    // Overload, not a bug: the transaction rolled back whole, so the same request can simply be retried.
    console.error(`[${requestId}] database busy: transaction expired`, error instanceof Error ? error.message.split("\n").at(-1) : error);
    return new ApiError("unavailable", "The database is too busy to finish this request; try again shortly", undefined, { "Retry-After": "2" });
  }
  if (isForeignKeyViolation(error) || isRecordGone(error)) {
    // What the request wrote refers to, or updates, a row a concurrent request deleted after it was
    // read (the transaction rolled back whole): the thing is gone, as a request moments later would be told.
    console.warn(`[${requestId}] refers to a row deleted meanwhile`, error instanceof Error ? error.message.split("\n").at(-1) : error);
    return new ApiError("not_found", "Not found: it was deleted while this request ran");
  }
  if (isUniqueViolation(error)) {
    // A row the request wrote collides with one a concurrent request wrote after this one checked
    // (the transaction rolled back whole). But a write no domain function checks first fails the same
    // way every time, a bug the client cannot fix: logged as an error with the constraint and the
    // stack, so it does not pass for a client's conflict. None of it goes into the response.
    console.error(`[${requestId}] unique violation on ${violatedConstraint(error) ?? "an unnamed constraint"}, answered 409 conflict`, error);
    return new ApiError("conflict", "This conflicts with a change made at the same time; reload and try again");
  }
  if (isOverloaded(error)) {
    // A deadlock or a pool wait that timed out: rolled back whole, safe to retry.
    console.warn(`[${requestId}] database busy`, (error as Error).message);
    return new ApiError("unavailable", "The database is busy; try again shortly", undefined, { "Retry-After": "1" });
  }
  console.error(`[${requestId}] unhandled error`, error);
  return new ApiError("internal", `Internal error (request ${requestId})`);
}

/**
 * No connection or transaction could be had in time (Prisma P2028), or PostgreSQL broke a deadlock
 * (40P01): the request did nothing and may simply be retried, so 503 rather than a generic 500.
 */
function isOverloaded(error: unknown): boolean {
  for (let e = error as { code?: unknown; cause?: unknown; meta?: { driverAdapterError?: { cause?: { originalCode?: unknown } } } } | undefined, depth = 0; e && depth < 5; depth++) {
    if (e.code === "P2028" || e.code === "40P01" || e.meta?.driverAdapterError?.cause?.originalCode === "40P01") return true;
    e = e.cause as typeof e;
  }
  return false;
}

const READ_METHODS = new Set(["GET", "HEAD", "OPTIONS"]);

async function resolveHub(ctx: AuthContext, permission: Permission): Promise<HubContext> {
  const { hub, role } = await targetHubOrThrow(ctx, ctx.hubHeader, permission);
  return { ...ctx, hub, role };
}

/** X-Timezone: an IANA zone for dates in answers (`age`, "yesterday"); an unknown one is ignored with a warning. */
function timeZoneFrom(req: Request): string | undefined {
  const zone = req.headers.get("x-timezone")?.trim();
  if (!zone) return undefined;
  if (zone.length <= 64) {
    try {
      return new Intl.DateTimeFormat("en-US", { timeZone: zone }).resolvedOptions().timeZone;
    } catch {
      // not a zone this runtime knows
    }
  }
  addWarning(req, `ignored X-Timezone: not an IANA time zone`);
  return undefined;
}

function requestIdFrom(req: Request): string {
  const given = req.headers.get("x-request-id");
  return given && /^[\w.:-]{1,128}$/.test(given) ? given : newId();
}

/** Path params, ids lowered (normalizeId): every route then looks an id up as it is stored. */
function flattenParams(params: Record<string, string | string[] | undefined> | undefined): Params {
  const flat: Params = {};
  for (const [key, value] of Object.entries(params ?? {})) {
    if (typeof value === "string") flat[key] = normalizeId(value);
    else if (Array.isArray(value)) flat[key] = value.join("/");
  }
  return flat;
}

/** An error envelope for a request no wrapper handles (unknown paths, other methods), with the usual headers. */
export function plainErrorResponse(req: Request, error: ApiError): Response {
  const response = errorResponse(error);
  response.headers.set("Cache-Control", "no-store");
  response.headers.set("X-Request-Id", requestIdFrom(req));
  return response;
}

type MethodHandlers = Record<"GET" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS", RouteHandler>;

/**
 * 405 JSON handlers for the methods a route file does not implement, and its OPTIONS. Next would
 * answer OPTIONS itself, with an Allow naming every method the file exports (these 405s included)
 * and neither X-Request-Id nor Cache-Control: this one names what the route really does.
 */
export function methodsNotAllowed(...allowed: string[]): MethodHandlers {
  const handler: RouteHandler = async (req) => {
    const response = plainErrorResponse(
      req,
      new ApiError("method_not_allowed", `${req.method} is not supported here; use ${allowed.join(", ")}`, { allowed }),
    );
    response.headers.set("Allow", allowed.join(", "));
    return response;
  };
  // HEAD is Next's GET without the body, so it works exactly where GET does.
  const allow = [...allowed, ...(allowed.includes("GET") ? ["HEAD"] : []), "OPTIONS"].join(", ");
  const options: RouteHandler = async (req) =>
    new Response(null, { status: 204, headers: { Allow: allow, "Cache-Control": "no-store", "X-Request-Id": requestIdFrom(req) } });
  return { GET: handler, POST: handler, PUT: handler, PATCH: handler, DELETE: handler, OPTIONS: options };
}

/** Handlers of a route that exists only while `enabled()` (the admin bootstrap and its token): otherwise 404, as for its main method. */
export function onlyWhile(enabled: () => boolean, handlers: MethodHandlers): MethodHandlers {
  const gate =
    (handler: RouteHandler): RouteHandler =>
    async (req, context) =>
      enabled() ? handler(req, context) : plainErrorResponse(req, new ApiError("not_found", "Not found"));
  return {
    GET: gate(handlers.GET),
    POST: gate(handlers.POST),
    PUT: gate(handlers.PUT),
    PATCH: gate(handlers.PATCH),
    DELETE: gate(handlers.DELETE),
    OPTIONS: gate(handlers.OPTIONS),
  };
}
