import { openApiDocument } from "@/lib/openapi/openapi-document.ts";
import { Card, PageHeader } from "./ui.tsx";

// The document is plain JSON walked by key; typing every OpenAPI node would add nothing here.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = Record<string, any>;

const METHOD_TONES: Record<string, string> = {
  get: "bg-sky-100 text-sky-800",
  post: "bg-emerald-100 text-emerald-800",
  put: "bg-amber-100 text-amber-800",
  patch: "bg-violet-100 text-violet-800",
  delete: "bg-rose-100 text-rose-800",
};

/** The OpenAPI document rendered on the server: every operation with its parameters, body and response schema. */
export function ApiReference() {
  const doc = openApiDocument() as Json;
  const operations = Object.entries(doc.paths as Json).flatMap(([path, item]) =>
    Object.entries(item as Json).map(([method, op]) => ({ path, method, op: op as Json })),
  );
  const tags = (doc.tags as { name: string }[]).map((tag) => tag.name);
  const errorCodes = doc.components.schemas.ErrorEnvelope.properties.error.properties.code.description as string;
  return (
    <>
      <PageHeader
        title="API reference"
        subtitle={
          <>
            {operations.length} operations. The machine-readable document is{" "}
            <a className="text-indigo-700 hover:underline" href="/v1/openapi.json">
              /v1/openapi.json
            </a>{" "}
            (OpenAPI 3.1, generated from the same schemas the server validates with).
          </>
        }
      />
      <div className="flex flex-col gap-5">
        <Card title="Conventions">
          <div className="flex flex-col gap-2 text-sm text-slate-700">
            {String(doc.info.description)
              .split("\n\n")
              .map((paragraph) => (
                <p key={paragraph}>{paragraph}</p>
              ))}
            <p>
              <span className="font-medium">Error codes and statuses:</span> {errorCodes}.
            </p>
          </div>
        </Card>
        <nav aria-label="Sections" className="flex flex-wrap gap-2 text-sm">
          {tags.map((tag) => (
            <a key={tag} href={`#${anchor(tag)}`} className="rounded border border-slate-200 px-2 py-1 text-indigo-700 hover:bg-indigo-50">
              {tag}
            </a>
          ))}
          <a href="#schemas" className="rounded border border-slate-200 px-2 py-1 text-indigo-700 hover:bg-indigo-50">
            Schemas
          </a>
        </nav>
        {tags.map((tag) => (
          <section key={tag} id={anchor(tag)} aria-labelledby={`${anchor(tag)}-title`} className="flex flex-col gap-3">
            <h2 id={`${anchor(tag)}-title`} className="text-lg font-semibold">
              {tag}
            </h2>
            {operations
              .filter(({ op }) => op.tags?.[0] === tag)
              .map(({ path, method, op }) => (
                <Operation key={`${method} ${path}`} path={path} method={method} op={op} />
              ))}
          </section>
        ))}
        <section id="schemas" className="flex flex-col gap-3">
          <h2 className="text-lg font-semibold">Schemas</h2>
          {Object.entries(doc.components.schemas as Json).map(([name, schema]) => (
            <details key={name} id={`schema-${name}`} className="rounded border border-slate-200 bg-white p-3">
              <summary className="cursor-pointer font-mono text-sm">{name}</summary>
              <SchemaBlock schema={schema} />
            </details>
          ))}
        </section>
      </div>
    </>
  );
}

function Operation({ path, method, op }: { path: string; method: string; op: Json }) {
  const parameters = ((op.parameters ?? []) as Json[]).map((p) => (p.$ref ? resolve(p.$ref) : p));
  const body = op.requestBody?.content?.["application/json"]?.schema;
  const responses = Object.entries(op.responses as Json).filter(([status]) => /^\d+$/.test(status));
  return (
    <article id={op.operationId} className="rounded-lg border border-slate-200 bg-white p-4">
      <h3 className="flex flex-wrap items-center gap-2">
        <span className={`rounded px-2 py-0.5 font-mono text-xs font-semibold uppercase ${METHOD_TONES[method] ?? ""}`}>{method}</span>
        <code className="break-all text-sm font-semibold">{path}</code>
        {op.security?.length === 0 && <span className="rounded bg-slate-100 px-2 py-0.5 text-xs text-slate-600">public</span>}
        {op.security?.[0]?.adminToken && <span className="rounded bg-slate-100 px-2 py-0.5 text-xs text-slate-600">admin token</span>}
      </h3>
      <p className="mt-1 text-sm text-slate-600">{op.summary}</p>
      {parameters.length > 0 && (
        <table className="mt-3 w-full text-left text-sm">
          <thead className="text-xs uppercase text-slate-500">
            <tr>
              <th className="py-1 pr-3 font-medium">Parameter</th>
              <th className="py-1 pr-3 font-medium">In</th>
              <th className="py-1 pr-3 font-medium">Type</th>
              <th className="py-1 font-medium">Notes</th>
            </tr>
          </thead>
          <tbody>
            {parameters.map((p) => (
              <tr key={`${p.in}:${p.name}`} className="border-t border-slate-100 align-top">
                <td className="py-1 pr-3 font-mono">
                  {p.name}
                  {p.required && <span className="text-rose-600">*</span>}
                </td>
                <td className="py-1 pr-3 text-slate-500">{p.in}</td>
                <td className="py-1 pr-3 font-mono text-xs">{typeLabel(p.schema)}</td>
                <td className="py-1 text-slate-600">{p.description ?? ""}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {body && (
        <details className="mt-3">
          <summary className="cursor-pointer text-sm font-medium">Request body{op.requestBody.required ? "" : " (optional)"}</summary>
          <SchemaBlock schema={body} />
        </details>
      )}
      {responses.map(([status, response]) => (
        <details key={status} className="mt-2">
          <summary className="cursor-pointer text-sm font-medium">
            {status} {response.description} <span className="text-slate-500">({Object.keys(response.content ?? {}).join(", ")})</span>
          </summary>
          <SchemaBlock schema={response.content?.["application/json"]?.schema ?? response.content?.[Object.keys(response.content ?? {})[0] ?? ""]?.schema} />
        </details>
      ))}
      <p className="mt-2 text-xs text-slate-500">Errors: 4XX and 5XX answer the error envelope.</p>
    </article>
  );
}

function SchemaBlock({ schema }: { schema: unknown }) {
  return <pre className="mt-2 max-h-96 overflow-auto rounded bg-slate-50 p-3 text-xs leading-5">{JSON.stringify(schema ?? {}, null, 2)}</pre>;
}

function typeLabel(schema: Json | undefined): string {
  if (!schema) return "";
  if (schema.enum) return (schema.enum as unknown[]).join(" | ");
  const type = Array.isArray(schema.type) ? schema.type.join(" | ") : (schema.type ?? "any");
  return schema.format ? `${type} (${schema.format})` : type;
}

function resolve(ref: string): Json {
  const doc = openApiDocument() as Json;
  return ref
    .replace(/^#\//, "")
    .split("/")
    .reduce((node: Json, key) => node?.[key], doc);
}

function anchor(tag: string): string {
  return tag.toLowerCase().replace(/[^a-z0-9]+/g, "-");
}
