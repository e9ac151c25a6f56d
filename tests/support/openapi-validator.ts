import { Ajv2020 } from "ajv/dist/2020.js";
import { openApiDocument } from "@/lib/openapi/openapi-document.ts";
import type { ApiResponse } from "./harness.ts";

type Json = Record<string, any>;

const DOC_ID = "engram-openapi";

/**
 * Validates API responses against the response schemas of /v1/openapi.json with a JSON Schema
 * 2020-12 validator: the status must be documented (exactly or as 4XX/5XX) and the JSON body must match.
 */
export function openApiValidator(document: Json = openApiDocument()) {
  const ajv = new Ajv2020({ strict: false, allErrors: true, validateFormats: false });
  ajv.addSchema({ $id: DOC_ID, components: document.components, paths: document.paths });
  const pointer = (...parts: string[]) => parts.map((p) => p.replace(/~/g, "~0").replace(/\//g, "~1")).join("/");
  const validatorAt = (ref: string) => ajv.getSchema(ref) ?? ajv.compile({ $ref: ref });

  return {
    /** Whether the operation's documented request body schema admits `body`. */
    accepts(method: string, pathTemplate: string, body: unknown): boolean {
      const op = document.paths[pathTemplate]?.[method.toLowerCase()];
      if (!op?.requestBody) throw new Error(`${method} ${pathTemplate} documents no request body`);
      const ref = `${DOC_ID}#/${pointer("paths", pathTemplate, method.toLowerCase(), "requestBody", "content", "application/json", "schema")}`;
      const validate = validatorAt(ref);
      return validate(body) as boolean;
    },
    /** Throws with the validator's errors when `res` does not match the operation's documented response. */
    check(method: string, pathTemplate: string, res: ApiResponse): void {
      const op = document.paths[pathTemplate]?.[method.toLowerCase()];
      if (!op) throw new Error(`${method} ${pathTemplate} is not in the document`);
      const status = String(res.status);
      const key = op.responses[status] ? status : op.responses[`${status[0]}XX`] ? `${status[0]}XX` : undefined;
      if (!key) throw new Error(`${method} ${pathTemplate} answered ${status}, which the document does not list (${Object.keys(op.responses).join(", ")})`);
      const response = op.responses[key].$ref ? document.components.responses[op.responses[key].$ref.split("/").pop()] : op.responses[key];
      const json = response.content?.["application/json"];
      if (!json) return;
      const ref =
        op.responses[key].$ref !== undefined
          ? `${DOC_ID}#/${pointer("components", "responses", op.responses[key].$ref.split("/").pop(), "content", "application/json", "schema")}`
          : `${DOC_ID}#/${pointer("paths", pathTemplate, method.toLowerCase(), "responses", key, "content", "application/json", "schema")}`;
      const validate = validatorAt(ref);
      if (!validate(res.body)) {
        throw new Error(
          `${method} ${pathTemplate} → ${status}: body does not match the document:\n${JSON.stringify(validate.errors, null, 1).slice(0, 3000)}\nbody: ${res.text.slice(0, 1500)}`,
        );
      }
    },
  };
}
