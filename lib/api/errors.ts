/** Every error code the API can answer with, and its HTTP status. */
export const ERROR_STATUS = {
  invalid_request: 400,
  invalid_json: 400,
  invalid_limit: 400,
  invalid_cursor: 400,
  personal_hub: 400,
  cannot_change_owner: 400,
  ownership_transfer_required: 400,
  last_member_delete_required: 400,
  no_email: 400,
  dismiss_not_applicable_to_decision: 400,
  invalid_action_for_notification_kind: 400,
  bulk_not_allowed_for_decision_kind: 400,
  // Checklist and digest sub-items (Memax's codes): another kind has none; a locked item waits for others.
  kind_not_supported: 400,
  item_locked: 400,
  // PATCH /v1/settings with a dream switch: per hub now (Memax's SDK, SettingsUpdateInput), PATCH /v1/hubs/{id}.
  moved_to_hub_settings: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  slug_taken: 409,
  already_member: 409,
  transfer_exists: 409,
  invite_limit_reached: 409,
  // Hub membership cap and the topic tree (docs/hubs.md, docs/topics.md; codes as the Memax SDK names them).
  hub_limit_reached: 409,
  // Members per hub (ENGRAM_HUB_MAX_MEMBERS, docs/hubs.md).
  member_limit_reached: 409,
  // A hub's board already holds its open decision gates (lib/boards; Memax's code).
  gate_limit: 409,
  // A hub's custom boards (lib/boards): at most MAX_CUSTOM_BOARDS.
  board_limit: 409,
  invalid_parent: 400,
  cycle_detected: 400,
  max_depth: 400,
  max_depth_subtree: 400,
  duplicate_name: 409,
  topic_archived: 409,
  parent_archived: 409,
  // Agent chat (lib/chat; Memax's codes): one turn at a time, answers that may be redone, approvals decided once.
  chat_session_locked: 409,
  chat_session_full: 409,
  regenerate_not_eligible: 409,
  chat_approval_already_decided: 409,
  chat_approval_timeout: 408,
  chat_replay_expired: 410,
  expired: 410,
  revoked: 410,
  used: 410,
  canceled: 410,
  body_too_large: 413,
  file_too_large: 413,
  // A storage quota (lib/quotas) is full: retrying will not help, so 413 rather than 429.
  quota_exceeded: 413,
  unsupported_content_type: 415,
  rate_limited: 429,
  // Answered by scripts/server.mjs before any route runs: the request line and headers are past Node's 16 KiB.
  headers_too_large: 431,
  internal: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

/** The one error type domain code throws; the route wrapper turns it into the envelope. */
export class ApiError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details?: Record<string, unknown>,
    readonly headers?: Record<string, string>,
  ) {
    super(message);
    this.name = "ApiError";
  }

  get status(): number {
    return ERROR_STATUS[this.code];
  }
}
