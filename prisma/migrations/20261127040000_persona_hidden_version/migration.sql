-- Personas (lib/personas) are read from synced identity configs; deleting one hides it until its file changes.
ALTER TABLE "agent_configs" ADD COLUMN "persona_hidden_version" INTEGER;
