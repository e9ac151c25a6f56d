import type { z } from "zod";

/**
 * A body that must carry at least one of `fields`. The check the route runs and the rule the OpenAPI
 * document states (`anyOf` of `required`, which a zod refine cannot express) come from one list.
 */
export function atLeastOneOf<T extends z.ZodObject>(schema: T, fields: readonly (keyof T["shape"] & string)[], issue: { message: string; path?: string[] }) {
  return schema
    .refine((body: Record<string, unknown>) => fields.some((field) => body[field] !== undefined), issue)
    .meta({ anyOf: fields.map((field) => ({ required: [field] })) });
}
