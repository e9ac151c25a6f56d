import { getDatabase } from "@/lib/db/database.ts";
import { newId, isUuid } from "@/lib/ids.ts";
import { resolveCredential } from "@/lib/auth/resolve-credential.ts";
import { hasSessionCookie, resolveSession } from "@/lib/auth/session.ts";
import type { AuthContext, HubContext, RequestContext } from "./context.ts";
import { errorResponse } from "./envelope.ts";
import { ApiError } from "./errors.ts";
import { can, isRole, type Permission } from "./permissions.ts";
import { rateLimiter, rateLimitHeaders, type Bucket, type RateLimitResult } from "./rate-limit.ts";

type Params = Record<string, string>;
type NextContext = { params: Promise<Record<string, string | string[] | undefined>> };
export type RouteHandler = (req: Request, context: NextContext) => Promise<Response>;

interface Options {
  /** Rate-limit bucket (default regular). */
  bucket?: Bucket;
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
  return handle(options.bucket ?? "regular", async (base, req, params, limit) => {
    // The dashboard's session cookie counts only when no Authorization header was sent.
    const authorization = req.headers.get("authorization");
    const { user, credential } =
      !authorization && hasSessionCookie(req)
        ? await resolveSession(base.db, req, base.now())
        : await resolveCredential(base.db, authorization, base.now());
    const authCtx: AuthContext = { ...base, user, credential };
    await limit(user.id);
    const ctx = options.permission ? await resolveHub(authCtx, req, options.permission) : authCtx;
    return (handler as (ctx: AuthContext, req: Request, params: P) => Promise<Response>)(ctx, req, params as P);
  });
}

/** A route that needs no credential; rate-limited per client address. */
export function withPublic<P extends Params = Params>(
  options: Options,
  handler: (ctx: RequestContext, req: Request, params: P) => Promise<Response>,
): RouteHandler {
  return handle(options.bucket ?? "light", async (base, req, params, limit) => {
    await limit(`ip:${clientAddress(req)}`);
    return handler(base, req, params as P);
  });
}

type Limit = (identity: string) => Promise<void>;

function handle(
  bucket: Bucket,
  run: (base: RequestContext, req: Request, params: Params, limit: Limit) => Promise<Response>,
): RouteHandler {
  return async (req, context) => {
    const requestId = requestIdFrom(req);
    let limited: RateLimitResult | undefined;
    let response: Response;
    try {
      const database = await getDatabase().catch((error) => {
        console.error(`[${requestId}] database unavailable`, error);
        throw new ApiError("unavailable", "The database is not available; try again shortly");
      });
      const base: RequestContext = { db: database.prisma, sql: database.sql, dbKind: database.kind, requestId, now: () => new Date() };
      const limit: Limit = async (identity) => {
        limited = await rateLimiter().limit(bucket, identity);
        if (!limited.success) {
          const retryAfter = Math.max(1, Math.ceil(limited.retryAfterMs / 1000));
          throw new ApiError(
            "rate_limited",
            `Rate limit of ${limited.limit} requests per minute exceeded; retry in ${retryAfter}s`,
            { limit: limited.limit, retry_after: retryAfter },
            { "Retry-After": String(retryAfter) },
          );
        }
      };
      response = await run(base, req, flattenParams(await context.params), limit);
    } catch (error) {
      response = toErrorResponse(error, requestId);
    }
    // An event stream keeps its "no-transform": without it the server's gzip would buffer the events.
    if (!response.headers.get("cache-control")?.includes("no-transform")) response.headers.set("Cache-Control", "no-store");
    response.headers.set("X-Request-Id", requestId);
    if (limited) for (const [name, value] of Object.entries(rateLimitHeaders(limited))) response.headers.set(name, value);
    return response;
  };
}

/** Any throw becomes the envelope; unknown errors are logged and never leak. */
export function toErrorResponse(error: unknown, requestId: string): Response {
  if (error instanceof ApiError) return errorResponse(error);
  console.error(`[${requestId}] unhandled error`, error);
  return errorResponse(new ApiError("internal", `Internal error (request ${requestId})`));
}

async function resolveHub(ctx: AuthContext, req: Request, permission: Permission): Promise<HubContext> {
  const header = req.headers.get("x-hub-id")?.trim();
  const membership = header
    ? isUuid(header)
      ? await ctx.db.hubMember.findUnique({ where: { hubId_userId: { hubId: header, userId: ctx.user.id } }, include: { hub: true } })
      : null
    : await ctx.db.hubMember.findFirst({ where: { userId: ctx.user.id, hub: { hubType: "personal", ownerId: ctx.user.id } }, include: { hub: true } });
  if (!membership || !isRole(membership.role)) throw new ApiError("not_found", "Hub not found");
  if (!can(membership.role, permission, membership.hub)) {
    throw new ApiError("forbidden", `Your role (${membership.role}) does not allow this in hub "${membership.hub.name}"`);
  }
  return { ...ctx, hub: membership.hub, role: membership.role };
}

function requestIdFrom(req: Request): string {
  const given = req.headers.get("x-request-id");
  return given && /^[\w.:-]{1,128}$/.test(given) ? given : newId();
}

function flattenParams(params: Record<string, string | string[] | undefined> | undefined): Params {
  const flat: Params = {};
  for (const [key, value] of Object.entries(params ?? {})) {
    if (typeof value === "string") flat[key] = value;
    else if (Array.isArray(value)) flat[key] = value.join("/");
  }
  return flat;
}

function clientAddress(req: Request): string {
  return req.headers.get("x-forwarded-for")?.split(",")[0]?.trim() || req.headers.get("x-real-ip") || "local";
}

/** 405 JSON handlers for the methods a route file does not implement. */
export function methodsNotAllowed(...allowed: string[]): Record<"GET" | "POST" | "PUT" | "PATCH" | "DELETE", RouteHandler> {
  const handler: RouteHandler = async (req) => {
    const requestId = requestIdFrom(req);
    const response = errorResponse(
      new ApiError("method_not_allowed", `${req.method} is not supported here; use ${allowed.join(", ")}`, { allowed }),
    );
    response.headers.set("Allow", allowed.join(", "));
    response.headers.set("Cache-Control", "no-store");
    response.headers.set("X-Request-Id", requestId);
    return response;
  };
  return { GET: handler, POST: handler, PUT: handler, PATCH: handler, DELETE: handler };
}
