-- The embedder a chunk's vector came from (its id, lib/ai/embedder.ts). An edit keeps the vectors of
-- unchanged chunks, but nothing said which model made them: after a model change an edited memory mixed
-- the old model's vectors with the new one's. Stored vectors stay NULL (their model is not known): an
-- edit embeds those chunks again, and `npm run reembed` records every one.
ALTER TABLE "chunks" ADD COLUMN "embedding_model" text;
