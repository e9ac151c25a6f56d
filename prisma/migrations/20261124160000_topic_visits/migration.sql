-- When each member last opened a topic (POST /v1/topics/:id/visit, Memax's topics.markVisit): one row per
-- topic and user, gone with either.
CREATE TABLE "topic_visits" (
    "topic_id" UUID NOT NULL,
    "user_id" UUID NOT NULL,
    "visited_at" TIMESTAMPTZ(3) NOT NULL,
    CONSTRAINT "topic_visits_pkey" PRIMARY KEY ("topic_id", "user_id"),
    CONSTRAINT "topic_visits_topic_id_fkey" FOREIGN KEY ("topic_id") REFERENCES "topics"("id") ON DELETE CASCADE ON UPDATE CASCADE,
    CONSTRAINT "topic_visits_user_id_fkey" FOREIGN KEY ("user_id") REFERENCES "users"("id") ON DELETE CASCADE ON UPDATE CASCADE
);
CREATE INDEX "topic_visits_user_id_idx" ON "topic_visits"("user_id");
