import { z } from "zod";
import { timestampSchema } from "@/lib/api/timestamp.ts";
import { VERDICTS } from "./card-feedback.ts";

/** Open gates a hub's board holds at once (Memax's limit); one more is `409 gate_limit`. */
export const MAX_OPEN_GATES = 3;
export const MAX_QUESTION_CHARS = 500;
export const MAX_OPTION_CHARS = 200;
export const MAX_CONTEXT_CHARS = 4000;
/** Settled cards a board shows after its open ones. */
export const SETTLED_SLOTS_SHOWN = 20;

const option = z.string().trim().min(1, "an option must not be empty").max(MAX_OPTION_CHARS, `an option is at most ${MAX_OPTION_CHARS} characters`);

export const requestDecisionBodySchema = z.object({
  question: z.string().trim().min(1, "question must not be empty").max(MAX_QUESTION_CHARS, `question is at most ${MAX_QUESTION_CHARS} characters`),
  options: z
    .array(option)
    .min(2, "give 2 to 4 options")
    .max(4, "give 2 to 4 options")
    .refine((list) => new Set(list.map((o) => o.toLowerCase())).size === list.length, "options must differ"),
  context: z.string().trim().max(MAX_CONTEXT_CHARS, `context is at most ${MAX_CONTEXT_CHARS} characters`).optional(),
  source_agent: z.string().trim().max(64).optional(),
});
export type RequestDecisionBody = z.output<typeof requestDecisionBodySchema>;

/**
 * Memax's slot actions. A decision gate settles by `choose` (with `choice`) or `dismiss`; `reopen` undoes
 * either. A custom board's card takes `ack`, `dismiss`, `reopen` and `feedback` (with `verdict`).
 */
export const SLOT_ACTIONS = ["ack", "dismiss", "feedback", "choose", "reopen"] as const;

export const resolveSlotBodySchema = z.object({
  action: z.enum(SLOT_ACTIONS, { message: `action must be one of ${SLOT_ACTIONS.join(", ")}` }),
  /** For choose: the option's id ("1"…"4") or its exact text. */
  choice: z.string().trim().min(1).max(MAX_OPTION_CHARS).optional(),
  /** For feedback: whether the card's answer was right. */
  verdict: z.enum(VERDICTS, { message: `verdict must be one of ${VERDICTS.join(", ")}` }).optional(),
  /**
   * For a custom board's card: the `content_updated_at` of the answer the sender read. When the card
   * has been refreshed since, the action is refused (409) rather than applied to an answer its
   * sender never saw.
   */
  content_updated_at: timestampSchema("content_updated_at must be an RFC 3339 time").optional(),
});
export type ResolveSlotBody = z.output<typeof resolveSlotBodySchema>;
