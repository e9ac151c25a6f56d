-- Memax's Settings (its SDK's types.ts): the dream tuning a person sets for the hubs they own, the
-- personal hub's header aurora, the hubs muted from the pulse view and the dev flags. Before, GET
-- /v1/settings answered none of the fields the SDK requires and PATCH dropped them as unknown. The five
-- dream switches are not here: they are per hub (hubs.settings), as the SDK says.
-- The similarity threshold and staleness days are NULL until set: the run then follows the install's
-- defaults (0.9, ENGRAM_DREAM_STALE_DAYS), which an operator may change after a person saved nothing.
ALTER TABLE "user_settings"
  ADD COLUMN "dreams_excluded_kinds" TEXT[] NOT NULL DEFAULT '{}',
  ADD COLUMN "dreams_similarity_threshold" DOUBLE PRECISION,
  ADD COLUMN "dreams_staleness_days" INTEGER,
  ADD COLUMN "hub_header_aurora_mode" TEXT NOT NULL DEFAULT 'signature',
  ADD COLUMN "pulse_hidden_hub_ids" UUID[] NOT NULL DEFAULT '{}',
  ADD COLUMN "dev_flags" JSONB NOT NULL DEFAULT '{}';
