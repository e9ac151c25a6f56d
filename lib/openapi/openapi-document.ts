import { z } from "zod";
import { ERROR_STATUS } from "@/lib/api/errors.ts";
import { DEFAULT_LIMIT, MAX_CURSOR_LENGTH, MAX_LIMIT } from "@/lib/api/pagination.ts";
import { MAX_BODY_BYTES } from "@/lib/api/parse.ts";
import { MAX_MEMORY_BODY_BYTES } from "@/lib/memories/memory-fields.ts";
import { MAX_SESSION_BODY_BYTES } from "@/lib/agent-sessions/agent-session-fields.ts";
import { OPERATIONS, type Operation } from "./operations.ts";

type Schema = Record<string, unknown>;

const SCHEMA_PREFIX = "#/components/schemas/";

/**
 * The OpenAPI 3.1 document of the REST API, generated from the zod schemas the routes parse with
 * (requests) and the domain serializers are typed by (responses). Built once per process.
 */
export function openApiDocument(): Schema {
  cached ??= build();
  return cached;
}

let cached: Schema | undefined;

function build(): Schema {
  const components: Record<string, Schema> = {};
  const convert = (schema: z.ZodType, io: "input" | "output"): Schema => {
    const json = z.toJSONSchema(schema, { target: "draft-2020-12", io, unrepresentable: "any", cycles: "ref", reused: "inline" }) as Schema;
    const defs = (json.$defs ?? {}) as Record<string, Schema>;
    delete json.$defs;
    delete json.$schema;
    // Named schemas (`.meta({ id })`) become components; their refs point there.
    for (const [name, def] of Object.entries(defs)) {
      const key = componentName(name, io);
      components[key] ??= rewriteRefs(def, io) as Schema;
    }
    return rewriteRefs(json, io) as Schema;
  };

  const paths: Record<string, Record<string, unknown>> = {};
  for (const op of OPERATIONS) {
    (paths[op.path] ??= {})[op.method] = operationObject(op, convert);
  }

  return {
    openapi: "3.1.0",
    jsonSchemaDialect: "https://json-schema.org/draft/2020-12/schema",
    info: {
      title: "Engram API",
      version: "1",
      description: [
        "Engram's REST contract. Every JSON response is an envelope: `{ \"data\": … }` on success, `{ \"error\": { code, message, details? } }` otherwise (see ErrorEnvelope for the codes); this document alone is served bare.",
        "Authenticate with `Authorization: Bearer egk_…` (an API key from the dashboard or POST /v1/auth/api-keys); the dashboard's session cookie also works when no Authorization header is sent.",
        "`X-Hub-ID` names the hub a write lands in, a list or search reads, or recall ranks first; each operation taking it says what it does without it (a write: the personal hub).",
        `Lists are cursor-paginated: \`limit\` (default ${DEFAULT_LIMIT}, clamped to ${MAX_LIMIT}, unless the operation's \`limit\` says otherwise) and the \`next_cursor\` of the previous page; \`has_more\` says whether another page exists.`,
        `JSON bodies are at most ${MAX_BODY_BYTES} bytes (POST /v1/memories and PATCH /v1/memories/{id}: ${MAX_MEMORY_BODY_BYTES}; PUT /v1/agent-sessions: ${MAX_SESSION_BODY_BYTES}). Every response carries X-Request-Id and Cache-Control: no-store (this document included), and rate-limited ones X-RateLimit-Limit/Remaining/Reset.`,
      ].join("\n\n"),
    },
    servers: [{ url: "/" }],
    security: [{ apiKey: [] }],
    tags: [...new Set(OPERATIONS.map((op) => op.tag))].map((name) => ({ name })),
    paths,
    components: {
      securitySchemes: {
        apiKey: { type: "http", scheme: "bearer", bearerFormat: "egk_…", description: "An Engram API key (prefix egk_) or an OAuth access token" },
        adminToken: { type: "http", scheme: "bearer", description: "The server's ENGRAM_ADMIN_TOKEN" },
      },
      parameters: {
        limit: limitParameter({ default: DEFAULT_LIMIT, max: MAX_LIMIT }),
        cursor: {
          name: "cursor",
          in: "query",
          required: false,
          description: `The next_cursor of the previous page (opaque, signed); at most ${MAX_CURSOR_LENGTH} characters`,
          schema: { type: "string", maxLength: MAX_CURSOR_LENGTH },
        },
        hubHeader: hubHeaderParameter(PERSONAL_HUB_HEADER),
      },
      schemas: {
        ...components,
        ErrorEnvelope: errorEnvelope(),
      },
      responses: {
        Error: { description: "Error envelope", content: { "application/json": { schema: { $ref: `${SCHEMA_PREFIX}ErrorEnvelope` } } } },
      },
    },
  };
}

function operationObject(op: Operation, convert: (schema: z.ZodType, io: "input" | "output") => Schema): Schema {
  const parameters: Schema[] = [];
  for (const name of op.path.matchAll(/\{(\w+)\}/g)) {
    const described = op.pathParams?.[name[1]!];
    parameters.push({ name: name[1], in: "path", required: true, ...(described && { description: described }), schema: { type: "string" } });
  }
  if (op.query) {
    const json = convert(op.query, "input");
    const required = new Set((json.required as string[] | undefined) ?? []);
    for (const [name, schema] of Object.entries((json.properties ?? {}) as Record<string, Schema>)) {
      if (name === "limit" && op.limit) {
        // This route's own default and maximum: the shared parameter states parseLimit's.
        parameters.push(limitParameter(op.limit));
        continue;
      }
      if (name === "limit" || name === "cursor") {
        parameters.push({ $ref: `#/components/parameters/${name}` });
        continue;
      }
      const { description, ...rest } = schema;
      parameters.push({ name, in: "query", required: required.has(name), ...(typeof description === "string" && { description }), schema: rest });
    }
  }
  if (op.hubHeader === true) parameters.push({ $ref: "#/components/parameters/hubHeader" });
  else if (op.hubHeader) parameters.push(hubHeaderParameter(op.hubHeader));
  for (const header of op.headers ?? []) parameters.push({ name: header.name, in: "header", required: false, description: header.description, schema: { type: "string" } });

  const data: Schema = op.data ? convert(op.data, "output") : { type: "object" };
  const envelope = { type: "object", required: ["data"], properties: { data } };
  const success: Schema = {};
  const produces = op.produces ?? "json";
  if (produces === "redirect") success["302"] = { description: "Found: the browser's next step", headers: { Location: { required: true, schema: { type: "string" } } } };
  for (const status of produces === "redirect" ? [] : (op.statuses ?? [200])) {
    const content: Schema =
      produces === "binary"
        ? { "application/octet-stream": { schema: { type: "string", contentMediaType: "application/octet-stream" } } }
        : produces === "sse"
          ? { "text/event-stream": { schema: { type: "string" } } }
          : produces === "sse-or-json"
            ? { "application/json": { schema: envelope }, "text/event-stream": { schema: { type: "string" } } }
            : produces === "document"
              ? { "application/json": { schema: data } }
              : { "application/json": { schema: envelope } };
    success[String(status)] = { description: status === 201 ? "Created" : status === 202 ? "Accepted" : "OK", content };
  }

  const security = op.auth === "none" ? [] : op.auth === "admin" ? [{ adminToken: [] }] : undefined;
  return {
    operationId: operationId(op),
    tags: [op.tag],
    summary: op.summary,
    ...(security && { security }),
    ...(parameters.length && { parameters }),
    ...(op.body && {
      requestBody: {
        required: !op.bodyOptional,
        content: { "application/json": { schema: convert(op.body, "input") } },
      },
    }),
    responses: {
      ...success,
      "4XX": { $ref: "#/components/responses/Error" },
      "5XX": { $ref: "#/components/responses/Error" },
    },
  };
}

/** X-Hub-ID of a write (withAuth's target hub): without it the personal hub, or a hub-limited key's first hub. */
const PERSONAL_HUB_HEADER = "Target hub id; without it the personal hub (for a key limited to other hubs, the first of them)";

function hubHeaderParameter(description: string): Schema {
  return { name: "X-Hub-ID", in: "header", required: false, description, schema: { type: "string" } };
}

function limitParameter(limit: NonNullable<Operation["limit"]>): Schema {
  const note = limit.note ? `; ${limit.note}` : "";
  return {
    name: "limit",
    in: "query",
    required: false,
    description: `Page size: a whole number ≥ 1; default ${limit.default}, larger values are clamped to ${limit.max}${note}`,
    schema: { type: "string", pattern: "^[0-9]+$", default: String(limit.default) },
  };
}

/** `{ error: { code, message, details? } }` with every code the server answers with. */
function errorEnvelope(): Schema {
  const codes = Object.keys(ERROR_STATUS);
  return {
    type: "object",
    required: ["error"],
    properties: {
      error: {
        type: "object",
        required: ["code", "message"],
        properties: {
          code: { type: "string", enum: codes, description: codes.map((code) => `${code}: ${ERROR_STATUS[code as keyof typeof ERROR_STATUS]}`).join(", ") },
          message: { type: "string" },
          details: { type: "object" },
        },
      },
    },
  };
}

function componentName(name: string, io: "input" | "output"): string {
  return io === "input" ? `${name}Input` : name;
}

function rewriteRefs(value: unknown, io: "input" | "output"): unknown {
  if (Array.isArray(value)) return value.map((item) => rewriteRefs(item, io));
  if (!value || typeof value !== "object") return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (key === "$ref" && typeof item === "string" && item.startsWith("#/$defs/")) {
      out[key] = SCHEMA_PREFIX + componentName(item.slice("#/$defs/".length), io);
    } else if (key === "$ref" && item === "#") {
      out[key] = item;
    } else out[key] = rewriteRefs(item, io);
  }
  return out;
}

function operationId(op: Operation): string {
  const words = op.path
    .replace(/^\/v1\//, "")
    .split("/")
    .map((part) => (part.startsWith("{") ? `by-${part.slice(1, -1)}` : part))
    .join("-")
    .split(/[^a-zA-Z0-9]+/)
    .filter(Boolean);
  return [op.method, ...words].map((word, i) => (i === 0 ? word : word[0]!.toUpperCase() + word.slice(1))).join("");
}
