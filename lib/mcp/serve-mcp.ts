import {
  createMcpHandler,
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  isLegacyRequest,
  McpServer,
  WebStandardStreamableHTTPServerTransport,
  type AuthInfo,
  type StandardSchemaWithJSON,
} from "@modelcontextprotocol/server";
import type { z } from "zod";
import type { AuthContext } from "@/lib/api/context.ts";
import { errorResponse } from "@/lib/api/envelope.ts";
import { ApiError } from "@/lib/api/errors.ts";
import { parseWith, readBody, refuseNul, wellFormed } from "@/lib/api/parse.ts";
import { rateLimitHeaders, rateLimiter, type Bucket, type RateLimitResult } from "@/lib/api/rate-limit.ts";
import { toApiError } from "@/lib/api/with-auth.ts";
import { VERSION } from "@/lib/config.ts";
import { MAX_MEMORY_BODY_BYTES } from "@/lib/memories/memory-fields.ts";
import { toolAlias, toolNamer, type ToolDef, type ToolEnv } from "./mcp-tools.ts";
import { retryAfterSeconds } from "@/lib/api/retry-after-seconds.ts";
import { toolErrorResult } from "./tool-error-result.ts";

/** An MCP request body must hold an engram_push of the largest content, however it escapes. */
export const MAX_MCP_BODY_BYTES = MAX_MEMORY_BODY_BYTES;
/**
 * What is read of the body of a client whose regular bucket is already empty: a small request is still
 * read, charged and answered with its ids (a recall spends the heavy bucket alone), a larger one is
 * refused unread. Charged only after parsing, an over-limit client made the server read and parse up
 * to the whole body bound for every refusal (before per-call charges, withAuth's token refused it first).
 */
const OVER_LIMIT_BODY_BYTES = 64 * 1024;
/** Messages in one JSON-RPC batch (the SDK's own MAX_BATCH_SIZE). */
const MAX_BATCH_MESSAGES = 100;

const INSTRUCTIONS =
  "Engram is the user's (and their team's) memory. Recall before answering questions about past work, decisions or the project; " +
  "save durable knowledge (decisions, how-tos, findings) with a push; capture a summary at the end of a significant session.";

/**
 * A tool's schema as tools/list shows it, with validation left to the tool's handler: the SDK's own
 * check answers bad arguments with a bare text error, where every other failure carries
 * structuredContent.error with a REST code (invalid_request, naming the field).
 */
function listedSchema(schema: z.ZodObject): StandardSchemaWithJSON {
  return { "~standard": { ...schema["~standard"], validate: (value: unknown) => ({ value }) } };
}

/**
 * Characters of read-only tool results one HTTP request answers with, a batch's together: a batch of
 * 100 engram_get calls was 100 pages of 100,000 characters, tens of MB in one response. The first
 * read always runs (a single call is never refused) and every read that runs is answered whole (see readFits).
 */
export const MAX_RESULT_CHARS_PER_REQUEST = 2_000_000;

/**
 * Tool calls of one HTTP request running at once. The SDK starts every call of a batch together, so a
 * batch of 100 engram_get calls made 100 page reads at once and could hold up to 100 pool connections
 * (only its response was bounded); the rest of a batch waits, and is answered in its order as before.
 */
export const MAX_TOOL_CALLS_AT_ONCE = 4;

/** One request's tool calls, at most MAX_TOOL_CALLS_AT_ONCE running and the others waiting in the order they came. */
class CallSlots {
  private running = 0;
  private readonly waiting: (() => void)[] = [];

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.running < MAX_TOOL_CALLS_AT_ONCE) this.running += 1;
    else await new Promise<void>((resolve) => this.waiting.push(resolve));
    try {
      return await work();
    } finally {
      // The slot passes straight to the next waiting call, so a new call cannot overtake it.
      const next = this.waiting.shift();
      if (next) next();
      else this.running -= 1;
    }
  }
}

/** What one HTTP request's read-only results have taken of MAX_RESULT_CHARS_PER_REQUEST. */
interface ResultBudget {
  used: number;
  /** Read-only calls running now, and the largest result one has answered with: what those may add. */
  running: number;
  largest: number;
  /** What the running reads are counted at together, each at the most its result can be (see readBound). */
  runningBound: number;
  /** Reads waiting for a running one to end (see mustWait). */
  waiting: (() => void)[];
  /** Heavy calls refused for the budget: their tokens are given back together once the request's calls end. */
  heavyRefunds: number;
}

function newResultBudget(): ResultBudget {
  return { used: 0, running: 0, largest: 0, runningBound: 0, waiting: [], heavyRefunds: 0 };
}

/**
 * Until a read has answered there is nothing to measure the others by: readFits let every read start
 * then, and a batch's first four (MAX_TOOL_CALLS_AT_ONCE) ran at once whatever their size (four pages
 * JSON escapes sixfold were 4.8 million characters). A read waits while others run and none has
 * answered, or while what was answered and the running reads and this one, each at its bound, would
 * pass the budget. Checked in the same turn as the read counts itself running: an await in between let
 * every read pass the check before any counted.
 */
function mustWait(budget: ResultBudget, bound: number): boolean {
  if (budget.running === 0) return false;
  return budget.used === 0 || budget.used + budget.runningBound + bound > MAX_RESULT_CHARS_PER_REQUEST;
}

/**
 * What a read not yet answered is counted at: the largest result so far, or more when its tool tells the
 * most its page can take (`pageBound`). Judged by the largest alone, one small read answered
 * (engram_hubs) let four pages of escaped text run at once again, 4.8 million characters; reads run
 * together only while their bounds fit, so two long pages never do and short ones still can.
 */
function readBound(budget: ResultBudget, pageBound: number): number {
  return Math.max(budget.largest, pageBound);
}

function nextReadEnd(budget: ResultBudget): Promise<void> {
  return new Promise<void>((resolve) => budget.waiting.push(resolve));
}

/** A read has ended (answered or failed): the reads waiting to be measured look again. */
function readEnded(budget: ResultBudget): void {
  for (const wake of budget.waiting.splice(0)) wake();
}

/**
 * Whether a read may start: refused once what was answered, with the reads still running and this one
 * each counted at the largest result so far, would pass the budget. Decided before it runs, as a refusal
 * after the read had counted an access (the agent's retry counted it again) and spent an ask's model
 * call for nothing; a read that starts is answered whole. The first read always starts.
 */
function readFits(budget: ResultBudget): boolean {
  if (budget.used === 0) return true;
  return budget.used < MAX_RESULT_CHARS_PER_REQUEST && budget.used + (budget.running + 1) * budget.largest <= MAX_RESULT_CHARS_PER_REQUEST;
}

/**
 * A read past the request's budget, as the tool's error: the agent reads on in a request of its own.
 * Write tools are never refused here: their change is made, and their results are bounded by the body.
 */
function overBudget(tool: ToolDef, budget: ResultBudget): ApiError {
  return new ApiError(
    "invalid_request",
    `This request's tool results already hold ${budget.used} characters (at most ${MAX_RESULT_CHARS_PER_REQUEST} in one request, a batch's together): call ${tool.name} again in a request of its own`,
    { max_result_chars: MAX_RESULT_CHARS_PER_REQUEST },
  );
}

/** One McpServer per request (stateless): tools close over the caller's context. */
function buildServer(env: ToolEnv, tools: ToolDef[], budget: ResultBudget, slots: CallSlots): McpServer {
  // listChanged stated as false: left unset the SDK declares it true, and a 2026-07-28 subscriptions/listen for it then
  // holds an event stream open for good (one user could fill the process-wide 1,024 subscriptions); the tool set never changes.
  const server = new McpServer({ name: "engram", version: VERSION }, { capabilities: { tools: { listChanged: false } }, instructions: INSTRUCTIONS });
  for (const tool of tools) {
    server.registerTool(tool.name, { title: tool.title, description: tool.description, inputSchema: listedSchema(tool.input), annotations: tool.annotations }, (raw: unknown) =>
      slots.run(async () => {
        try {
          // Half a surrogate pair ("\ud800") reads as U+FFFD, as in a REST body: as it was, it failed in the database.
          const args = parseWith(tool.input, wellFormed(raw), "Invalid arguments");
          // As on REST: PostgreSQL text cannot hold U+0000, so a NUL would fail in the database as an internal error.
          refuseNul(args, "");
          const readOnly = tool.annotations.readOnlyHint === true;
          if (!readOnly) {
            // A write's result is bounded by its request body and never counted against the reads' budget.
            const out = await tool.run(env, args as never);
            return { content: [{ type: "text" as const, text: out.text }], structuredContent: out.structured };
          }
          // Not looked up for a request's first read (a single call's only one): until it answers, no other read runs beside it.
          const first = budget.used === 0 && budget.running === 0;
          const pageBound = first ? 0 : ((await tool.resultBound?.(env, args as never)) ?? 0);
          while (mustWait(budget, readBound(budget, pageBound))) await nextReadEnd(budget);
          if (!readFits(budget)) {
            // Refused before it ran: a recall's or an ask's heavy token (one of the few a minute) is given
            // back after the request (dispatch), or the retry the refusal asks for paid twice. A regular
            // token stays paid, as any answered call's: given back, one long read and 99 more cost a
            // batch one token, and each refund was a write of its own on the same counter row.
            if (heavyToolNames(tools).has(tool.name)) budget.heavyRefunds += 1;
            throw overBudget(tool, budget);
          }
          const bound = readBound(budget, pageBound);
          budget.running += 1;
          budget.runningBound += bound;
          try {
            const out = await tool.run(env, args as never);
            const result = { content: [{ type: "text" as const, text: out.text }], structuredContent: out.structured };
            // Measured as the response carries it (JSON, escapes included).
            const size = JSON.stringify(result).length;
            budget.used += size;
            budget.largest = Math.max(budget.largest, size);
            return result;
          } finally {
            budget.running -= 1;
            budget.runningBound -= bound;
            readEnded(budget);
          }
        } catch (error) {
          // Domain errors are results the model can read and act on, not transport failures; database
          // conditions get REST's codes, so an agent knows to retry (unavailable) or that a row is gone.
          return toolErrorResult(toApiError(error, env.ctx.requestId));
        }
      }),
    );
  }
  return server;
}

const handlers = new Map<ToolDef[], ReturnType<typeof createMcpHandler>>();

/** The current protocol revision (per-request envelope), answered with plain JSON. */
function modernHandler(tools: ToolDef[]) {
  let handler = handlers.get(tools);
  if (!handler) {
    handler = createMcpHandler(({ authInfo }) => buildServer(authInfo!.extra!.env as ToolEnv, tools, authInfo!.extra!.budget as ResultBudget, authInfo!.extra!.slots as CallSlots), { legacy: "reject", responseMode: "json" });
    handlers.set(tools, handler);
  }
  return handler;
}

function jsonRpcError(status: number, code: number, message: string): Response {
  return Response.json({ jsonrpc: "2.0", id: null, error: { code, message } }, { status });
}

async function readBounded(req: Request, maxBytes: number): Promise<string | undefined> {
  // Streamed against the cap: a chunked body (no Content-Length) must not be buffered whole first.
  return readBody(req, maxBytes).catch((error: unknown) => {
    if (error instanceof ApiError && error.code === "body_too_large") return undefined;
    throw error;
  });
}

/** Rewrites memax_* tool names to the engram_* ones `tools` serves: accepted on tools/call, never listed. */
function applyAliases(message: unknown, tools: ToolDef[]): void {
  const messages = Array.isArray(message) ? message : [message];
  for (const m of messages) {
    if (m && typeof m === "object" && (m as { method?: unknown }).method === "tools/call") {
      const params = (m as { params?: { name?: unknown } }).params;
      if (params && typeof params.name === "string") params.name = toolAlias(params.name, tools) ?? params.name;
    }
  }
}

/**
 * The 2026-07-28 revision's Mcp-Name header mirrors params.name and the SDK refuses a request where
 * they differ: an alias rewritten in the body alone would refuse every memax_* call of a current client.
 */
function aliasedHeaders(headers: Headers, tools: ToolDef[]): Headers {
  const alias = toolAlias(headers.get("mcp-name")?.trim() ?? "", tools);
  if (!alias) return headers;
  const copy = new Headers(headers);
  copy.set("mcp-name", alias);
  return copy;
}

/** Tools doing model work count against the heavy bucket, as their REST endpoints do. */
const HEAVY_TOOLS = new Set(["engram_recall", "engram_ask"]);

const heavyNames = new Map<ToolDef[], Set<string>>();

/**
 * The names an endpoint serves heavy tools under (search and ask on /mcp/chatgpt): a name the endpoint
 * does not serve runs nothing, so it pays a regular token like any call, not the recall budget.
 */
function heavyToolNames(tools: ToolDef[]): Set<string> {
  let names = heavyNames.get(tools);
  if (!names) {
    names = new Set(tools.filter((t) => HEAVY_TOOLS.has(t.serves ?? t.name)).map((t) => t.name));
    heavyNames.set(tools, names);
  }
  return names;
}

/** JSON-RPC's implementation-defined server error, carrying REST's code and details in `data`. */
const RATE_LIMITED = -32000;
const SERVER_ERROR = -32000;
/** JSON-RPC's own code for an internal error (REST's 500). */
const INTERNAL_ERROR = -32603;

/**
 * An error thrown before or around the protocol (the database unavailable, an internal error, a refusal
 * by withAuth) as a JSON-RPC error with REST's status, headers, and code and details in `error.data`: the
 * REST envelope is no JSON-RPC response, and a client reads `error.code` as a number. Once the body is
 * read (`message`), it answers as the request did (its id, each request of a batch, no body for a
 * notification); before, with id null. A 401 keeps REST's envelope and its WWW-Authenticate challenge,
 * which is what an MCP client acts on (its sign-in starts there).
 */
export function mcpErrorResponse(error: ApiError, message?: unknown): Response {
  if (error.code === "unauthorized") return errorResponse(error);
  const code = error.code === "internal" ? INTERNAL_ERROR : SERVER_ERROR;
  const data = { code: error.code, ...error.details };
  return refusal(error.status, error.headers ?? {}, { code, message: error.message, data }, message);
}

/**
 * Every tool call is charged as its REST request would be: one heavy token for a recall or an ask (as
 * POST /v1/recall takes, and nothing from the regular bucket), one regular token for any other call.
 * A batch (2025-era JSON-RPC arrays, up to 100 messages) pays for each call, not once per HTTP request;
 * a request without a tool call (initialize, tools/list, or one that cannot be read) pays one regular
 * token. A refusal is a JSON-RPC error (the REST envelope is not one, and a client reads `error.code`
 * as a number): 429 with Retry-After, REST's `rate_limited` and its details in `error.data`.
 */
async function chargeToolCalls(ctx: AuthContext, tools: ToolDef[], message: unknown): Promise<{ refused?: Response; headers: Record<string, string>; heavyCharges?: WindowCharges }> {
  const heavy = heavyToolNames(tools);
  const messages = Array.isArray(message) ? message : [message];
  // Requests only: a tools/call sent as a notification (no id) is never answered, and the SDK runs no tool for it.
  const calls = messages.filter((m) => (m as { method?: unknown })?.method === "tools/call" && requestId(m) !== undefined);
  const charges: Bucket[] = calls.length
    ? calls.map((m) => (heavy.has(String((m as { params?: { name?: unknown } }).params?.name)) ? "heavy" : "regular"))
    : ["regular"];
  // A batch is refused whole: every bucket it draws on is checked first, so that one refused spends none
  // of what is left (a concurrent request may still take tokens in between; then its later calls are
  // refused as before, and those it had charged given back). Even a bucket it needs one token from: charged in message order, [push, push,
  // recall] with the heavy bucket empty took two regular tokens before its recall refused it all. A
  // single call needs no check: its one charge is the check.
  const checks: { bucket: Bucket; needed: number; left: RateLimitResult }[] = [];
  for (const bucket of charges.length > 1 ? new Set(charges) : []) {
    checks.push({ bucket, needed: charges.filter((charge) => charge === bucket).length, left: await rateLimiter().peek(bucket, ctx.user.id) });
  }
  // More calls than a bucket's whole cap never fit, however long the client waits: a 429 with a
  // Retry-After had it retry the same batch for good.
  for (const { bucket, needed, left } of checks) {
    if (needed > left.limit) return { refused: overCap(left.limit, bucket, needed, message), headers: {} };
  }
  for (const { bucket, needed, left } of checks) {
    if (left.remaining < needed) {
      const refused = { ...left, success: false };
      return { refused: rateLimited(refused, bucket, message), headers: rateLimitHeaders(refused) };
    }
  }
  let headers: Record<string, string> = {};
  // Where each bucket's calls were counted, window by window: the minute can turn between two charges,
  // and kept as the last charge's window alone, a refund gave the newer minute calls the older had paid.
  const charged = new Map<Bucket, WindowCharges>();
  for (const bucket of charges) {
    const limited = await rateLimiter().limit(bucket, ctx.user.id);
    headers = rateLimitHeaders(limited);
    if (!limited.success) {
      // Refused partway (a concurrent request took what the check saw left): nothing of the batch runs, so
      // the tokens its earlier calls took are given back, or its retry paid for them twice.
      for (const [paid, windows] of charged) {
        for (const [windowEnd, calls] of windows) await rateLimiter().refund?.(paid, ctx.user.id, calls, windowEnd);
      }
      return { refused: rateLimited(limited, bucket, message), headers };
    }
    const windows = charged.get(bucket) ?? new Map<number, number>();
    windows.set(limited.reset, (windows.get(limited.reset) ?? 0) + 1);
    charged.set(bucket, windows);
  }
  return { headers, heavyCharges: charged.get("heavy") };
}

/** A request's calls of one bucket by the window that counted them (its end, `reset`), in the order charged. */
type WindowCharges = Map<number, number>;

/** A JSON-RPC request (not a notification, not a response), whose id an answer must carry. */
function requestId(message: unknown): { id: unknown } | undefined {
  if (!message || typeof message !== "object" || Array.isArray(message)) return undefined;
  const { method, id } = message as { method?: unknown; id?: unknown };
  return typeof method === "string" && id !== undefined ? { id } : undefined;
}

/** JSON-RPC's code for a request it will not take as sent. */
const INVALID_REQUEST = -32600;

/** A batch needing `needed` tokens of a bucket capped at `limit` a minute: refused as invalid (400), each request answered. */
function overCap(limit: number, bucket: Bucket, needed: number, message: unknown): Response {
  const what = bucket === "heavy" ? "recall and ask calls" : "calls";
  const error = {
    code: INVALID_REQUEST,
    message: `This batch holds ${needed} ${what}, over the rate limit of ${limit} per minute: send them in smaller batches`,
    data: { code: "invalid_request", limit, needed },
  };
  return refusal(400, {}, error, message);
}

/**
 * `error` answering `message`. JSON-RPC 2.0 answers each request of a batch in an array, never answers a
 * notification (nothing to answer: no body, the status and headers say it), and answers what it could
 * not read with id null.
 */
function refusal(status: number, headers: Record<string, string>, error: object, message: unknown): Response {
  const answer = (id: unknown) => ({ jsonrpc: "2.0", id, error });
  if (Array.isArray(message)) {
    const ids = message.map(requestId).filter((request) => request !== undefined);
    return ids.length ? Response.json(ids.map(({ id }) => answer(id)), { status, headers }) : new Response(null, { status, headers });
  }
  const notification = message !== null && typeof message === "object" && typeof (message as { method?: unknown }).method === "string" && !requestId(message);
  if (notification) return new Response(null, { status, headers });
  return Response.json(answer(requestId(message)?.id ?? null), { status, headers });
}

/**
 * The 429 refusing `message` (undefined: a body not read). Retry-After is when the limiter's current
 * window ends: the sliding estimate does not say how much of the previous window's calls are still
 * counted then, so a batch needing several tokens may be refused once more at that point.
 */
function rateLimited(limited: RateLimitResult, bucket: Bucket, message: unknown): Response {
  const retryAfter = retryAfterSeconds(limited.retryAfterMs);
  const headers = { ...rateLimitHeaders(limited), "Retry-After": String(retryAfter) };
  const what = bucket === "heavy" ? "Recall and ask rate limit" : "Rate limit";
  const error = { code: RATE_LIMITED, message: `${what} of ${limited.limit} per minute exceeded; retry in ${retryAfter}s`, data: { code: "rate_limited", limit: limited.limit, retry_after: retryAfter } };
  return refusal(429, headers, error, message);
}

/**
 * Serves one Streamable HTTP POST statelessly with JSON responses: 2026-07-28 traffic through
 * the SDK's per-request handler, 2025-era traffic (2025-03-26 … 2025-11-25) through the SDK's
 * web-standard transport with enableJsonResponse.
 */
export async function serveMcp(ctx: AuthContext, req: Request, tools: ToolDef[], origin: string): Promise<Response> {
  // Checked without spending a token: the calls in the body decide which buckets pay.
  const regular = await rateLimiter().peek("regular", ctx.user.id);
  const read = await readMessage(req, regular.success ? MAX_MCP_BODY_BYTES : OVER_LIMIT_BODY_BYTES);
  if (!regular.success && "tooLarge" in read) return rateLimited(regular, "regular", undefined);
  if ("body" in read) applyAliases(read.body, tools);
  try {
    // A request that cannot be read still pays one regular token, as every request did before parsing.
    const { refused, headers, heavyCharges } = await chargeToolCalls(ctx, tools, "body" in read ? read.body : undefined);
    if (refused) return refused;
    const response = "body" in read ? await dispatchEntries(ctx, req, tools, origin, read.text, read.body, heavyCharges) : read.invalid;
    for (const [name, value] of Object.entries(headers)) response.headers.set(name, value);
    return response;
  } catch (error) {
    // Answered here, where the message is known: withAuth's answer has no id to give.
    if (!("body" in read)) throw error;
    return mcpErrorResponse(toApiError(error, ctx.requestId), read.body);
  }
}

/** A JSON-RPC message the SDK takes: a request, a notification, or a response. */
function isMessage(entry: unknown): boolean {
  return isJSONRPCRequest(entry) || isJSONRPCNotification(entry) || isJSONRPCResultResponse(entry) || isJSONRPCErrorResponse(entry);
}

/**
 * JSON-RPC 2.0 (§6) answers each invalid entry of a batch with its own Invalid Request error (id null)
 * and the others as usual: the SDK refused a batch holding one invalid entry whole, with one 400 object
 * that is neither an array nor an answer to the batch's valid requests.
 */
async function dispatchEntries(ctx: AuthContext, req: Request, tools: ToolDef[], origin: string, text: string, body: unknown, heavyCharges?: WindowCharges): Promise<Response> {
  const invalid = Array.isArray(body) ? body.filter((entry) => !isMessage(entry)).length : 0;
  // An empty batch, or one with nothing wrong in it, is the SDK's to answer.
  if (!invalid) return dispatch(ctx, req, tools, origin, text, body, heavyCharges);
  const errors = Array.from({ length: invalid }, () => ({ jsonrpc: "2.0", id: null, error: { code: INVALID_REQUEST, message: "Invalid Request: not a JSON-RPC message" } }));
  const valid = (body as unknown[]).filter(isMessage);
  if (!valid.length) return Response.json(errors, { status: 400 });
  const response = await dispatch(ctx, req, tools, origin, JSON.stringify(valid), valid, heavyCharges);
  // Notifications alone (202, no body): only the invalid entries have answers.
  if (response.status === 202) return Response.json(errors, { status: 200 });
  if (response.status !== 200 || !response.headers.get("content-type")?.includes("application/json")) return response;
  const answers: unknown = await response.json();
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  return Response.json([...(Array.isArray(answers) ? answers : [answers]), ...errors], { status: 200, headers });
}

/** The JSON-RPC message(s) of the body, or the JSON-RPC error answering a body that is none. */
async function readMessage(req: Request, maxBytes: number): Promise<{ text: string; body: unknown } | { invalid: Response; tooLarge?: true }> {
  const text = await readBounded(req, maxBytes);
  if (text === undefined) return { invalid: jsonRpcError(413, -32600, `Request body exceeds ${maxBytes} bytes`), tooLarge: true };
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { invalid: jsonRpcError(400, -32700, "Parse error: the body is not JSON") };
  }
  // The SDK refuses such a batch too, but only after chargeToolCalls: it would first spend up to a minute's rate limit on calls never run.
  if (Array.isArray(body) && body.length > MAX_BATCH_MESSAGES) return { invalid: jsonRpcError(400, -32600, `Invalid Request: Batch must not exceed ${MAX_BATCH_MESSAGES} messages`) };
  return { text, body };
}

/**
 * JSON-RPC 2.0 answers a batch with an array even when it holds one request: the SDK's JSON transport
 * answers that one response alone, an object a client matching answers to its batch cannot read.
 */
async function asBatchAnswer(response: Response): Promise<Response> {
  if (response.status !== 200 || !response.headers.get("content-type")?.includes("application/json")) return response;
  const answer: unknown = await response.json();
  const headers = new Headers(response.headers);
  headers.delete("content-length");
  return Response.json(Array.isArray(answer) ? answer : [answer], { status: response.status, headers });
}

/** Hands the message(s) to the SDK: 2026-07-28 traffic per request, 2025-era traffic through its web-standard transport. */
async function dispatch(ctx: AuthContext, req: Request, tools: ToolDef[], origin: string, text: string, body: unknown, heavyCharges?: WindowCharges): Promise<Response> {
  const budget = newResultBudget();
  try {
    return await dispatchCalls(ctx, req, tools, origin, text, body, budget);
  } finally {
    // One refund per window for all the heavy calls refused for the budget, however many, given back where
    // they were charged; the budget refuses a batch's later reads, so the newest window's calls first.
    let left = budget.heavyRefunds;
    for (const [windowEnd, calls] of [...(heavyCharges ?? [])].reverse()) {
      if (left === 0) break;
      const given = Math.min(left, calls);
      await rateLimiter().refund?.("heavy", ctx.user.id, given, windowEnd);
      left -= given;
    }
  }
}

async function dispatchCalls(ctx: AuthContext, req: Request, tools: ToolDef[], origin: string, text: string, body: unknown, budget: ResultBudget): Promise<Response> {
  // Tools scope by their hub_id argument alone: REST's X-Hub-ID, sent by a client configured with REST's
  // headers, narrowed engram_list (and failed it when a slug) behind the model's back.
  const env: ToolEnv = { ctx: { ...ctx, hubHeader: undefined }, origin, toolName: toolNamer(tools) };
  const slots = new CallSlots();
  const authInfo: AuthInfo = { token: "", clientId: ctx.credential.oauth?.clientId ?? ctx.credential.type, scopes: [], extra: { env, budget, slots } };
  const forward = new Request(req.url, { method: "POST", headers: aliasedHeaders(req.headers, tools), body: text });
  if (await isLegacyRequest(forward, body)) {
    const server = buildServer(env, tools, budget, slots);
    const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
    await server.connect(transport);
    try {
      const response = await transport.handleRequest(forward, { parsedBody: body, authInfo });
      return Array.isArray(body) ? await asBatchAnswer(response) : response;
    } finally {
      void server.close().catch(() => undefined);
    }
  }
  return modernHandler(tools).fetch(forward, { parsedBody: body, authInfo });
}
